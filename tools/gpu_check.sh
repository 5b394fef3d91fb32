#!/usr/bin/env bash
# tools/gpu_check.sh: on a machine with NVIDIA GPUs, builds and runs devmesh's
# NCCL tests (//tests/comm:nccl_test: world size 1 collectives, Split of a
# world of one, init timeout, Abort; //tests/device_mesh:nccl_mesh_test: a
# mesh dim with its own NCCL config made from the layout on the caller's
# stream with synchronize off, and a world-sized dim that is the world
# communicator; //tests/comm:nccl_shrink_test: issue 20's shrink) and prints
# a short table. NCCL allows one rank per GPU, so with one GPU the checks run
# at world size 1. A world of one cannot really shrink (ncclCommShrink needs
# a rank to exclude and refuses the caller's own), so one GPU checks what it
# can: Shrink's refusals on a live communicator, which stays usable, and
# ncclCommRevoke (later calls refused, teardown by ncclCommAbort); the
# two-rank shrink (rank 1 excluded and aborted, rank 0's child of one
# working, its parent aborted) runs only where 2 GPUs are visible and skips
# with "needs 2 GPUs" otherwise. DeviceMesh::Shrink's use of it (a death in a
# multi-process NCCL mesh) is not covered here: it needs a GPU per rank.
#
#   tools/gpu_check.sh            # uses bazel from PATH
#   BAZEL="bazel --output_base=/tmp/ob" tools/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."

BAZEL=${BAZEL:-bazel}

if command -v nvidia-smi >/dev/null 2>&1; then
  echo "== GPUs"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found: the NCCL tests will skip (no CUDA device visible)"
fi

echo "== building and running //tests/comm:nccl_test" \
  "//tests/comm:nccl_shrink_test //tests/device_mesh:nccl_mesh_test"
log=$(mktemp)
$BAZEL test //tests/comm:nccl_test //tests/comm:nccl_shrink_test \
  //tests/device_mesh:nccl_mesh_test \
  --test_output=all --cache_test_results=no \
  >"$log" 2>&1
rc=$?

echo
printf '%-60s %s\n' "test" "result"
printf '%-60s %s\n' "----" "------"
# gtest lines: "[       OK ] Suite.Name (3 ms)", "[  SKIPPED ] ...", "[  FAILED  ] ...".
grep -E '^\[ +(OK|SKIPPED|FAILED) +\] [A-Za-z0-9_/.]+ \(' "$log" |
  sed -E 's/^\[ +([A-Z]+) +\] ([^ ]+) \((.*)\)$/\2 \1 \3/' |
  while read -r name result time rest; do
    printf '%-60s %s (%s %s)\n' "$name" "$result" "$time" "$rest"
  done
if grep -q "no CUDA device visible" "$log"; then
  echo
  grep -m1 "no CUDA device visible" "$log"
fi
echo
if [ $rc -ne 0 ]; then
  echo "bazel test exited $rc; full log: $log"
  tail -n 40 "$log"
else
  echo "all NCCL tests passed or skipped; full log: $log"
fi
exit $rc
