#!/usr/bin/env bash
# tools/launcher_check/torchrun2.sh TORCHRUN COMMAND...: one torchrun agent
# per namespace host (--nnodes=2, 2 workers each) running COMMAND
# (--no-python). Rendezvous: torchrun's c10d backend on host 1's veth
# address, port 29400, with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: the
# workers then get MASTER_ADDR/MASTER_PORT of a store of their own
# (TORCHELASTIC_USE_AGENT_STORE=False), which devmesh's rank 0 hosts. Host
# 1's agent hosts the rendezvous store (is_host=1): torchrun cannot tell
# that 10.231.7.1 is its own address when its host name resolves to
# loopback. Exit 0 when both agents exit 0.
set -uo pipefail
here="$(dirname "$0")"
source "$here/hosts.sh"
torchrun="$1"; shift
pids=()
for n in 1 2; do
  "$here/on_host.sh" "$n" env TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 \
    "$torchrun" --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d \
    --rdzv-endpoint="$(lc_host_addr 1):29400" --rdzv-id=launcher_check \
    --rdzv-conf="is_host=$((n == 1)),join_timeout=60" --max-restarts=0 \
    --monitor-interval=0.5 --no-python "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
exit $rc
