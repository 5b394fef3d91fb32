#!/usr/bin/env bash
# tools/launcher_check/torchrun2.sh MODE TORCHRUN COMMAND...: one torchrun
# agent per namespace host (--nnodes=2, 2 workers each) running COMMAND
# (--no-python). Exit 0 when both agents exit 0. MODE:
#   static  torchrun's default static rendezvous (--node-rank,
#           --master-addr=10.231.7.1, --master-port=29500): host 1's agent
#           hosts a c10d TCPStore on 29500 and the workers join it as clients
#           (TORCHELASTIC_USE_AGENT_STORE=True), devmesh's rank 0 included.
#   c10d    torchrun's c10d rendezvous on host 1's veth address, port 29400
#           (the workers also use the agent's store). Host 1's agent is told
#           that it hosts the rendezvous (is_host=1): torchrun cannot tell
#           that 10.231.7.1 is its own address when its host name resolves
#           to loopback.
set -uo pipefail
here="$(dirname "$0")"
source "$here/hosts.sh"
mode="$1"; torchrun="$2"; shift 2
pids=()
for n in 1 2; do
  case "$mode" in
    c10d)
      args=(--rdzv-backend=c10d --rdzv-endpoint="$(lc_host_addr 1):29400"
        --rdzv-id=launcher_check
        --rdzv-conf="is_host=$((n == 1)),join_timeout=60") ;;
    static)
      args=(--node-rank=$((n - 1)) --master-addr="$(lc_host_addr 1)"
        --master-port=29500) ;;
    *) echo "torchrun2.sh: unknown mode '$mode'" >&2; exit 2 ;;
  esac
  "$here/on_host.sh" "$n" "$torchrun" --nnodes=2 \
    --nproc-per-node=2 "${args[@]}" --max-restarts=0 --monitor-interval=0.5 \
    --no-python "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
exit $rc
