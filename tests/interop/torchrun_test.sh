#!/bin/bash
# devmesh ranks under a real torchrun (from the torch venv), --nproc-per-node=4
# --no-python, in each of torchrun's three rendezvous modes:
#   static      --master-port=P (the agent hosts the store on P)
#   standalone  --standalone
#   c10d        --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:P
# each running mesh_worker (2x2 mesh, all-reduce along each dim, exact sums)
# $TORCHRUN_TEST_RUNS times (default 2), then: allreduce_2d in a short mode
# under torchrun, a mixed job (rank 0 Python, ranks 1..3 devmesh), and a
# --max-restarts=1 job whose second attempt must not see the first's keys.
# Prints one table: case, launches, failures, slowest end (s).
# Skips without the venv, fails then when DEVMESH_REQUIRE_TORCH=1.
# Args: mesh_worker allreduce_2d mixed_entry.sh mixed_rank.py
set -u
WORKER=$(realpath "$1"); ALLREDUCE=$(realpath "$2")
MIXED_ENTRY=$(realpath "$3"); MIXED_PY=$(realpath "$4")
VENV=${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}
if [ -z "$VENV" ]; then VENV=/opt/devmesh/torch-venv; fi
if [ ! -x "$VENV/bin/torchrun" ]; then
  if [ "${DEVMESH_REQUIRE_TORCH:-}" = 1 ]; then
    echo "FAILED: DEVMESH_REQUIRE_TORCH=1 but there is no $VENV/bin/torchrun"
    exit 1
  fi
  echo "SKIPPED: torch is not installed (no $VENV/bin/torchrun); run tools/install_torch.sh"
  exit 0
fi
TORCHRUN="$VENV/bin/torchrun"
PY="$VENV/bin/python"
RUNS=${TORCHRUN_TEST_RUNS:-2}
OUT=${TEST_TMPDIR:-$(mktemp -d)}
export OMP_NUM_THREADS=1
declare -A LAUNCHES FAILS SLOWEST
ORDER=()
STATUS=0

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# record CASE OK SECONDS
record() {
  [ -z "${LAUNCHES[$1]:-}" ] && { ORDER+=("$1"); LAUNCHES[$1]=0; FAILS[$1]=0; SLOWEST[$1]=0; }
  LAUNCHES[$1]=$((LAUNCHES[$1] + 1))
  [ "$2" = 1 ] || { FAILS[$1]=$((FAILS[$1] + 1)); STATUS=1; }
  SLOWEST[$1]=$(awk -v a="${SLOWEST[$1]}" -v b="$3" 'BEGIN{print (b>a)?b:a}')
}

# run CASE CHECK-FUNCTION TORCHRUN-ARGS...: one bounded launch.
run() {
  local name=$1 check=$2; shift 2
  local log="$OUT/$name.log" start end ok=0
  start=$(date +%s.%N)
  timeout -k 10 180 "$TORCHRUN" "$@" >"$log" 2>&1
  local code=$?
  end=$(date +%s.%N)
  if [ $code = 0 ] && $check "$log"; then ok=1; else
    echo "=== $name failed (exit $code); log:"; tail -n 40 "$log"
  fi
  record "$name" $ok "$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')"
}

check_mesh() {
  for line in "rank 0 dim dp sum 4 ok" "rank 2 dim dp sum 4 ok" \
              "rank 1 dim dp sum 6 ok" "rank 3 dim dp sum 6 ok" \
              "rank 0 dim tp sum 3 ok" "rank 1 dim tp sum 3 ok" \
              "rank 2 dim tp sum 7 ok" "rank 3 dim tp sum 7 ok" \
              "rank 0 agent_store 1" "rank 3 agent_store 1"; do
    grep -q "$line" "$1" || { echo "missing: $line"; return 1; }
  done
}
check_allreduce() {
  # 1K, 2K, 4K x (dp, tp): six rows of the table, each with #wrong (the 10th
  # column) 0.
  [ "$(awk '$3 ~ /^(dp|tp)$/ && $1 ~ /^[0-9]+$/ && $10 == 0' "$1" | wc -l)" = 6 ] &&
    [ "$(awk '$3 ~ /^(dp|tp)$/ && $1 ~ /^[0-9]+$/ && $10 != 0' "$1" | wc -l)" = 0 ]
}
check_mixed() {
  grep -q "rank 0 (python) read 3 devmesh keys" "$1" &&
    [ "$(grep -c 'read from_torch=t0' "$1")" = 3 ]
}
check_restart() {
  grep -q "rank 1 fails attempt 0 on purpose" "$1" &&
    grep -q "rank 0 attempt 1 (devmesh/restart-test/attempt_1) sees no attempt 0 keys" "$1" &&
    grep -q "rank 1 attempt 1 (devmesh/restart-test/attempt_1) sees no attempt 0 keys" "$1"
}

COMMON=(--nproc-per-node=4 --no-python)
for ((i = 0; i < RUNS; i++)); do
  run static check_mesh "${COMMON[@]}" --master-addr=127.0.0.1 \
    --master-port="$(free_port)" "$WORKER" mesh
  run standalone check_mesh "${COMMON[@]}" --standalone "$WORKER" mesh
  run c10d check_mesh "${COMMON[@]}" --rdzv-backend=c10d \
    --rdzv-endpoint="127.0.0.1:$(free_port)" --rdzv-id="c10d-$i" "$WORKER" mesh
done
run allreduce_2d check_allreduce "${COMMON[@]}" --standalone "$ALLREDUCE" \
  --min_bytes=1K --max_bytes=4K --iters=3 --max_iters=3 --warmup=1
MIXED_PYTHON="$PY" MIXED_SCRIPT="$MIXED_PY" MIXED_WORKER="$WORKER" \
  run mixed check_mixed "${COMMON[@]}" --standalone "$MIXED_ENTRY"
run restart check_restart --nproc-per-node=2 --no-python --max-restarts=1 \
  --monitor-interval=0.1 --rdzv-backend=c10d --rdzv-id=restart-test \
  --rdzv-endpoint="127.0.0.1:$(free_port)" "$WORKER" restart

printf '%-14s %9s %9s %12s\n' case launches failures slowest_s
for c in "${ORDER[@]}"; do
  printf '%-14s %9s %9s %12s\n' "$c" "${LAUNCHES[$c]}" "${FAILS[$c]}" "${SLOWEST[$c]}"
done
exit $STATUS
