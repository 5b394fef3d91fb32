#!/usr/bin/env bash
# 256 ranks on one host create their groups (issue 19): //bench:startup on a
# 16x16 mesh (its own launcher, rank 0 hosting the store). Three runs with
# the default backend (auto: both dims shared memory, made over the store
# alone): every rank must report, every rank's group creation must cost
# exactly 6 store round trips (3 per group), and no rank (the store host
# aside) may hold more than 3 sockets when ready (its two store connections:
# its own and its failure watch's, and its liveness beacon's listener,
# device_mesh/liveness_beacon.h; a shared-memory group holds none). One
# run with --backend=gloo: exactly 14 round trips (per dim 4 for the Gloo
# group and 3 for the shared-memory group that checks its calls: Gloo groups
# are verified by default) and at most 33 sockets (15 + 15 pair
# connections, plus the two store connections and the beacon's listener;
# the checkers hold none), made by //bench:startup_gloo, the same program
# with Gloo linked.
# Before layout-made groups this failed: the world communicator needed 255
# pairs per rank and ran out of ports ("bind: Address already in use").
set -uo pipefail
STARTUP="$1" SUMMARIZE="$2" STARTUP_GLOO="$3"
status=0
for run in 1 2 3 gloo; do
  log="${TEST_TMPDIR:-/tmp}/scale256.$run.log"
  if [ "$run" = gloo ]; then
    backend=gloo trips=14 sockets=33 bin="$STARTUP_GLOO"
  else
    backend=auto trips=6 sockets=3 bin="$STARTUP"
  fi
  timeout 240 "$bin" --mesh_shape=16x16 --backend="$backend" >"$log" 2>&1
  rc=$?
  python3 "$SUMMARIZE" --label "run $run" --store_rank 0 --expect_ranks 256 \
    --expect_round_trips "$trips" --max_sockets "$sockets" "$log" || status=1
  if [ "$rc" -ne 0 ]; then
    echo "run $run: $bin exited $rc" >&2
    grep -v PEER_BENCH_STARTUP "$log" | tail -5 >&2
    status=1
  fi
done
exit "$status"
