#!/usr/bin/env bash
# devmesh side by side with PyTorch's DeviceMesh, in one run: start-up over 8
# local ranks (shapes 8, 4x2, 2x4, 2x2x2), the allreduce_2d sweep through
# both sides' per-dim groups (2x2, float32, 1 KiB..64 MiB, Gloo), layout
# operations at 8..2^20 ranks with the memory of one mesh, and the store
# rows of //bench:store_ops when it writes --json_out. Prints one table,
# writes OUT_DIR/peer_bench.json (rows and raw figures), peer_bench.txt (the
# table) and peer_bench.png (the devmesh/PyTorch ratios).
#
#   tools/install.sh && tools/install_torch.sh   # once
#   tools/peer_bench.sh [--out_dir=/tmp/peer_bench] [--short] [-c opt|fastbuild]
#
# --short (what CI runs): shape 4x2, sizes 1 KiB/64 KiB/1 MiB, one round,
# worlds 8 and 2^20; built like `bazel test //...` (fastbuild, cached) unless
# -c is given, so its figures only show that every path runs. The full run
# builds with -c opt and takes about 17 minutes on a 2-core machine (9 of
# them in store_ops).
# PyTorch comes from the venv of tools/install_torch.sh
# ($DEVMESH_TORCH_VENV, default /opt/devmesh/torch-venv); without it the
# script stops with exit status 2. Every step is bounded in time; exit status
# non-zero when anything failed or an all-reduce gave a wrong result.
set -euo pipefail
cd "$(dirname "$0")/.."

out_dir=/tmp/peer_bench
short=0
mode=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out_dir=*) out_dir=${1#--out_dir=} ;;
    --short) short=1 ;;
    -c) shift; mode=${1:-} ;;
    -c*) mode=${1#-c} ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "peer_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$mode" ]; then
  if [ $short -eq 1 ]; then mode=fastbuild; else mode=opt; fi
fi
case "$mode" in opt|fastbuild|dbg) ;; *)
  echo "peer_bench.sh: -c must be opt, fastbuild or dbg, not '$mode'" >&2; exit 2 ;;
esac

venv=${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}
python=$venv/bin/python
if ! [ -x "$python" ] || ! timeout 120 "$python" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2>/dev/null; then
  echo "peer_bench.sh: no PyTorch venv with torch.distributed (Gloo) at $venv;" \
       "run tools/install_torch.sh (or set DEVMESH_TORCH_VENV)" >&2
  exit 2
fi
command -v gnuplot >/dev/null || {
  echo "peer_bench.sh: gnuplot not found; run tools/install.sh" >&2; exit 2; }
mkdir -p "$out_dir" && [ -w "$out_dir" ] || {
  echo "peer_bench.sh: cannot write to --out_dir $out_dir" >&2; exit 2; }

targets=(//bench:startup //bench:mesh_ops_peer //bench:allreduce_2d)
# The store rows need issue 10's store_ops --json_out; without it they are n/a.
store_ops=""
if grep -q 'json_out' bench/store_ops.cc 2>/dev/null; then
  targets+=(//bench:store_ops)
fi
timeout 1200 bazel build -c "$mode" "${targets[@]}"
bin_dir=$(bazel info -c "$mode" bazel-bin)/bench
[ ${#targets[@]} -eq 4 ] && store_ops=$bin_dir/store_ops

args=(--bin_dir="$bin_dir" --out_dir="$out_dir" --store_ops="$store_ops"
      --build_note="bazel -c $mode")
if [ $short -eq 1 ]; then
  args+=(--short)
  limit=600
else
  limit=5400
fi
timeout --kill-after=30 "$limit" "$python" tools/peer_bench/peer_bench.py "${args[@]}"
