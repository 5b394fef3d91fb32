#!/usr/bin/env bash
# tools/recovery_bench.sh: how long a (dp=3, tp=2) CPU job over 6 local ranks
# takes to go on after one rank is SIGKILLed at step 10 (kill to the first
# training step completed after it, on every rank that trains on), three
# ways, paired trial by trial in one run:
#   shrink    devmesh: the survivors call DeviceMesh::Shrink and go on with 2
#             replicas (//examples/elastic:elastic_training_main under
#             //bootstrap:launch --host_store --keep_going);
#   relaunch  devmesh without Shrink: the launcher stops every rank, and the
#             same job is launched again at once, resuming from each rank's
#             checkpoint file (written after every step);
#   torchrun  PyTorch's DeviceMesh (init_device_mesh, Gloo) under
#             torchrun --standalone --max-restarts=1: the agent stops the
#             workers and restarts all of them, which resume from their
#             checkpoint files (tools/recovery_bench/torch_elastic.py; needs
#             the torch venv, tools/install_torch.sh; skipped without it).
# Prints each trial and a table: p50, p95, max per way, and shrink's ratio to
# each baseline (ratio of medians, with a 95% bootstrap interval). Every
# launch is bounded by `timeout`; checkpoints live in a temporary directory
# removed at exit.
#
#   tools/recovery_bench.sh [--trials=10]
set -uo pipefail
cd "$(dirname "$0")/.."
TRIALS=10
for arg in "$@"; do
  case "$arg" in
    --trials=*) TRIALS="${arg#--trials=}" ;;
    *) echo "usage: $0 [--trials=N]" >&2; exit 2 ;;
  esac
done
VENV="${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}"
bazel build -c opt //examples/elastic:elastic_training_main //bootstrap:launch \
  >/dev/null 2>&1 || { echo "recovery_bench: build failed" >&2; exit 1; }
OUT="$(bazel info -c opt bazel-bin 2>/dev/null)"
BIN="$OUT/examples/elastic/elastic_training_main"
LAUNCH="$OUT/bootstrap/launch"
WORK="$(mktemp -d /tmp/recovery_bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
RESULTS="$WORK/results.txt"
: >"$RESULTS"

# kill_ns in $1, first_step_ns lines in $2 (a file each): prints the ms from
# the kill to the last rank's first step, or "fail".
elapsed() {
  python3 - "$1" "$2" <<'PY'
import re, sys
kill = re.findall(r"kill_ns=(\d+)", open(sys.argv[1]).read())
firsts = [int(x) for x in re.findall(r"first_step_ns=(\d+)", open(sys.argv[2]).read())]
if len(kill) != 1 or not firsts:
    print("fail")
else:
    print("%.1f" % ((max(firsts) - int(kill[0])) / 1e6))
PY
}

for t in $(seq 1 "$TRIALS"); do
  # shrink
  timeout 120 "$LAUNCH" --nproc=6 --host_store --keep_going -- "$BIN" \
    --kill_rank=2 --report_times >"$WORK/shrink.out" 2>&1
  ms="$(elapsed "$WORK/shrink.out" "$WORK/shrink.out")"
  good="$(grep -c "equal a fresh run's" "$WORK/shrink.out")"
  [ "$good" = 4 ] || ms=fail
  echo "shrink $ms" >>"$RESULTS"

  # relaunch
  rm -rf "$WORK/ckpt" && mkdir "$WORK/ckpt"
  timeout 120 "$LAUNCH" --nproc=6 --host_store -- "$BIN" --kill_rank=2 \
    --report_times --checkpoint_dir="$WORK/ckpt" >"$WORK/first.out" 2>&1
  timeout 120 "$LAUNCH" --nproc=6 --host_store -- "$BIN" --report_times \
    --checkpoint_dir="$WORK/ckpt" >"$WORK/second.out" 2>&1
  ms2="$(elapsed "$WORK/first.out" "$WORK/second.out")"
  good="$(grep -c "equal a fresh run's" "$WORK/second.out")"
  [ "$good" = 6 ] || ms2=fail
  echo "relaunch $ms2" >>"$RESULTS"

  # torchrun
  ms3=skipped
  if [ -x "$VENV/bin/torchrun" ]; then
    rm -rf "$WORK/tckpt" && mkdir "$WORK/tckpt"
    CHECKPOINT_DIR="$WORK/tckpt" KILL_RANK=2 KILL_STEP=10 \
      timeout 300 "$VENV/bin/torchrun" --standalone --nproc-per-node=6 \
      --max-restarts=1 tools/recovery_bench/torch_elastic.py \
      >"$WORK/torch.out" 2>&1
    ms3="$(elapsed "$WORK/torch.out" "$WORK/torch.out")"
    echo "torchrun $ms3" >>"$RESULTS"
  fi
  echo "trial $t: shrink $ms ms, relaunch $ms2 ms, torchrun $ms3 ms"
done

python3 - "$RESULTS" <<'PY'
import random, sys
rows = {}
for line in open(sys.argv[1]):
    way, value = line.split()
    rows.setdefault(way, []).append(value)
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]
def med(v):
    return pct(v, 0.5)
failed = 0
print("%-9s %6s %8s %8s %8s" % ("way", "trials", "p50 ms", "p95 ms", "max ms"))
good = {}
for way in ("shrink", "relaunch", "torchrun"):
    if way not in rows:
        continue
    ok = [float(x) for x in rows[way] if x != "fail"]
    failed += len(rows[way]) - len(ok)
    good[way] = ok
    if ok:
        print("%-9s %6d %8.0f %8.0f %8.0f" % (way, len(rows[way]), med(ok), pct(ok, 0.95), max(ok)))
    else:
        print("%-9s %6d   all failed" % (way, len(rows[way])))
random.seed(1)
for base in ("relaunch", "torchrun"):
    a, b = good.get("shrink"), good.get(base)
    if not a or not b:
        continue
    boots = []
    for _ in range(2000):
        ra = [random.choice(a) for _ in a]
        rb = [random.choice(b) for _ in b]
        boots.append(med(ra) / med(rb))
    boots.sort()
    print("shrink / %-8s p50 ratio %.3f (95%% interval %.3f-%.3f)" % (
        base, med(a) / med(b), boots[int(0.025 * len(boots))],
        boots[int(0.975 * len(boots)) - 1]))
print("failed trials: %d" % failed)
sys.exit(1 if failed else 0)
PY
