#!/usr/bin/env bash
# devmesh side by side with PyTorch's DeviceMesh and Open MPI, in one run:
# the machine's memory bandwidth and the all-reduce busbw it allows (bound),
# start-up over 8 local ranks (shapes 8, 4x2, 2x4, 2x2x2), the allreduce_2d
# sweep through devmesh's, PyTorch's (Gloo) and Open MPI's (MPI_Comm_split)
# per-dim groups (2x2, float32, 1 KiB..64 MiB), all-gather, reduce-scatter,
# reduce, gather, scatter and all-to-all (uneven splits) busbw per dim at
# 1 MiB and 16 MiB (//bench:collectives_2d
# against PyTorch), layout operations at 8..2^20 ranks with the memory of
# one mesh, and the store rows of //bench:store_ops when it writes
# --json_out. Prints one table, writes OUT_DIR/peer_bench.json (rows and raw
# figures), peer_bench.txt (the table) and peer_bench.png (the ratios).
#
#   tools/install.sh && tools/install_torch.sh   # once
#   tools/peer_bench.sh [--out_dir=/tmp/peer_bench] [--short] [-c opt|fastbuild]
#                       [--sections=bound,startup,allreduce,collectives,layout,store]
#                       [--rounds=N] [--sizes=BYTES,BYTES,...]
#
# devmesh runs with its CPU default backend (auto: shared memory inside one
# host); each all-reduce row's note says which backend its dim got. Open MPI
# (Debian's, mpicc from libopenmpi-dev) runs tools/peer_bench/mpi_allreduce.c
# under `mpirun -np 4 --oversubscribe --map-by core --bind-to
# core:overload-allowed --mca btl self,vader --mca mpi_yield_when_idle 1`
# (rank r on core r mod 2, as allreduce_2d binds; as root through
# OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1). All three
# sides time a run of clamp(ceil(8 MiB / bytes), 1, 100) back-to-back
# all-reduces after a barrier on a separate communicator, take the slowest
# rank's run / batch, the median over runs, and check a fresh pattern
# afterwards. The full run does 3 rounds, the sides taking turns going
# first; ratios are paired by round (interquartile mean, 95% bootstrap
# interval). The bound comes from tools/peer_bench/membw.c (copy and
# c = a + b over arrays larger than the caches, one process per core at
# once): bound busbw = bandwidth / (4 members x 2 bytes of traffic per byte:
# any all-reduce reads each input and writes each output once), the model
# written under the table.
#
# --short (what CI runs): shape 4x2, sizes 1 KiB/64 KiB/1 MiB, one round (the
# intervals print n/a), worlds 8 and 2^20, every column including Open MPI
# and the bound; built like `bazel test //...` (fastbuild, cached) unless -c
# is given, so its figures only show that every path runs (about 2.5
# minutes on a busy 2-core machine). The full run builds with -c opt; it took
# about 17 minutes on a 2-core machine (9 of them in store_ops) before the
# Open MPI, bound and all-gather/reduce-scatter sections and the 100-deep
# small-message batches were added, and has not been timed since; store_ops'
# op rows now run in 6 rounds (about 3 minutes), its rendezvous rows as
# before.
# PyTorch comes from the venv of tools/install_torch.sh
# ($DEVMESH_TORCH_VENV, default /opt/devmesh/torch-venv); without it, or
# without mpicc/mpirun or gnuplot, the script stops with exit status 2. Every
# step is bounded in time, and what the script starts is stopped when it
# exits (trap); exit status non-zero when anything failed or any side gave a
# wrong result.
set -euo pipefail
cd "$(dirname "$0")/.."

out_dir=/tmp/peer_bench
short=0
mode=""
sections=""
rounds=""
sizes=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out_dir=*) out_dir=${1#--out_dir=} ;;
    --short) short=1 ;;
    --sections=*) sections=${1#--sections=} ;;
    --rounds=*) rounds=${1#--rounds=} ;;
    --sizes=*) sizes=${1#--sizes=} ;;
    -c) shift; mode=${1:-} ;;
    -c*) mode=${1#-c} ;;
    -h|--help) sed -n '2,52p' "$0"; exit 0 ;;
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
for tool in mpicc mpirun gcc; do
  command -v "$tool" >/dev/null || {
    echo "peer_bench.sh: $tool not found; run tools/install.sh" >&2; exit 2; }
done
mkdir -p "$out_dir" && [ -w "$out_dir" ] || {
  echo "peer_bench.sh: cannot write to --out_dir $out_dir" >&2; exit 2; }

# The Open MPI side and the bandwidth probe, built here (not by Bazel: mpicc
# is the MPI build), into a directory removed on exit.
tmp=$(mktemp -d)
child=""
cleanup() {
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' INT TERM
timeout 120 mpicc -O2 -o "$tmp/mpi_allreduce" tools/peer_bench/mpi_allreduce.c
timeout 120 gcc -O2 -pthread -o "$tmp/membw" tools/peer_bench/membw.c

targets=(//bench:startup //bench:mesh_ops_peer //bench:allreduce_2d
         //bench:collectives_2d)
# The store rows need issue 10's store_ops --json_out; without it they are n/a.
store_ops=""
if grep -q 'json_out' bench/store_ops.cc 2>/dev/null; then
  targets+=(//bench:store_ops)
fi
timeout 1200 bazel build -c "$mode" "${targets[@]}"
bin_dir=$(bazel info -c "$mode" bazel-bin)/bench
[ ${#targets[@]} -eq 5 ] && store_ops=$bin_dir/store_ops

args=(--bin_dir="$bin_dir" --out_dir="$out_dir" --store_ops="$store_ops"
      --mpi_allreduce="$tmp/mpi_allreduce" --membw="$tmp/membw"
      --build_note="bazel -c $mode")
[ -n "$sections" ] && args+=(--sections="$sections")
# Narrower runs for one band: more rounds (tighter intervals), fewer sizes.
[ -n "$rounds" ] && args+=(--rounds_override="$rounds")
[ -n "$sizes" ] && args+=(--sizes_override="$sizes")
if [ $short -eq 1 ]; then
  args+=(--short)
  limit=600
else
  limit=5400
fi
# In the background so that the trap can stop it (the driver stops the
# process groups it started when it gets SIGTERM).
timeout --kill-after=30 "$limit" "$python" tools/peer_bench/peer_bench.py "${args[@]}" &
child=$!
rc=0
wait "$child" || rc=$?
child=""
exit "$rc"
