#!/usr/bin/env bash
# Compute overlapped with an all-reduce along each mesh dim, devmesh's
# IAllReduce + Work::Wait (//bench:overlap) beside PyTorch's DeviceMesh with
# async_op=True (tools/peer_bench/torch_overlap.py), in one run: shapes 2x2
# and 1x2, one rank per core, 1 MiB float32, 3 rounds with the sides taking
# turns going first; one table of medians (tools/peer_bench/overlap_bench.py
# says what each column is).
#
#   tools/install.sh && tools/install_torch.sh   # once
#   tools/overlap_bench.sh [--rounds=3] [--bytes=1048576] [--shapes=2x2,1x2]
#
# Needs the venv of tools/install_torch.sh ($DEVMESH_TORCH_VENV, default
# /opt/devmesh/torch-venv); exit status 2 without it. Every run is bounded
# in time (300 s), the ranks it starts are stopped when it exits; exit
# status 1 when a run failed or any side gave a wrong element.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}
if ! [ -x "$venv/bin/python" ]; then
  echo "overlap_bench.sh: no PyTorch venv at $venv; run tools/install_torch.sh" >&2
  exit 2
fi
args=()
for a in "$@"; do
  case "$a" in
    --rounds=*|--bytes=*|--shapes=*|--iters=*) args+=("--${a#--}") ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "overlap_bench.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
timeout 900 bazel build -c opt //bench:overlap >&2
bin=$(bazel info -c opt bazel-bin 2>/dev/null)/bench/overlap
exec timeout 1800 "$venv/bin/python" tools/peer_bench/overlap_bench.py \
  --bin="$bin" --python="$venv/bin/python" ${args[@]+"${args[@]}"}
