#!/usr/bin/env bash
# tools/launcher_check/by_hand.sh MASTER_ADDR COMMAND...: starts COMMAND as
# the 4 ranks of a 2-host job by hand, 2 per namespace host, with torchrun's
# variables and nothing else (no GLOO_SOCKET_IFNAME): what a new user tries
# before reaching for a launcher. Exit 0 when every rank exits 0.
# LC_BY_HAND_VIEWS (default "1 1 2 2") names the view of hosts.sh each rank
# runs on: "1 1 1b 1b" puts all 4 on host 1 (one host name), ranks 2 and 3
# with the second /dev/shm, as two containers of one host name would be.
set -uo pipefail
here="$(dirname "$0")"
master="$1"; shift
read -ra views <<<"${LC_BY_HAND_VIEWS:-1 1 2 2}"
pids=()
for r in 0 1 2 3; do
  "$here/on_host.sh" "${views[$r]}" env MASTER_ADDR="$master" MASTER_PORT=29500 \
    RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
exit $rc
