#!/usr/bin/env bash
# tools/launcher_check/on_host.sh N COMMAND...: runs COMMAND on namespace
# host N of hosts.sh (1 or 2): in its network namespace, in a fresh UTS
# namespace carrying its host name. Execs, so the caller's process id is
# COMMAND's.
set -euo pipefail
source "$(dirname "$0")/hosts.sh"
n="$1"; shift
exec ip netns exec "$(lc_host_ns "$n")" \
  unshare --uts sh -c 'hostname "$0" && exec "$@"' "$(lc_host_name "$n")" "$@"
