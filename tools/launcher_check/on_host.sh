#!/usr/bin/env bash
# tools/launcher_check/on_host.sh V COMMAND...: runs COMMAND on namespace
# host V of hosts.sh (1 or 2; 1b: host 1 with its second /dev/shm): in the
# view's mount namespace (its private /dev/shm; the working directory kept),
# then its host's network namespace, in a fresh UTS namespace carrying the
# host's name. Execs, so the caller's process id is COMMAND's.
set -euo pipefail
source "$(dirname "$0")/hosts.sh"
v="$1"; shift
n="$(lc_view_host "$v")"
mnt="$(lc_view_mnt "$v")" || { echo "on_host.sh: view '$v' has no mount namespace (lc_hosts_up)" >&2; exit 125; }
exec nsenter --mount="$mnt" --wd="$PWD" ip netns exec "$(lc_host_ns "$n")" \
  unshare --uts sh -c 'hostname "$0" && exec "$@"' "$(lc_host_name "$n")" "$@"
