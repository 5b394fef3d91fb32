#!/usr/bin/env bash
# tools/recovery_bench.sh: how long a (dp=3, tp=2) CPU job over 6 local ranks
# takes to go on after one rank is SIGKILLed at step 10, and to heal back to
# 3 replicas, several ways, trial by trial in one run:
#   shrink    devmesh: the survivors call DeviceMesh::Shrink and go on with 2
#             replicas (//examples/elastic:elastic_training_main under
#             //bootstrap:launch --host_store --keep_going); kill to the first
#             step after it, on every rank that trains on;
#   relaunch  devmesh without Shrink: the launcher stops every rank, and the
#             same job is launched again at once, resuming from each rank's
#             checkpoint file (written after every step); kill to the first
#             step of the relaunched job;
#   torchrun  PyTorch's DeviceMesh (init_device_mesh, Gloo) under
#             torchrun --standalone --max-restarts=1: the agent stops the
#             workers and restarts all of them, which resume from their
#             checkpoint files (tools/recovery_bench/torch_elastic.py); kill
#             to the first step after the restart (a full-size step);
#   heal      devmesh's heal (//tools/recovery_bench:heal_main, the elastic
#             example's heal path, under launch --spare_restarts=1): Shrink
#             to 2 replicas, the dead rank restarted as a spare and the
#             removed one staying as one, Grow along dp before each step,
#             BroadcastState of the parameters and the step; from the later
#             spare ready (calling JoinAsSpare) to the last of the 6 ranks'
#             first step on the grown mesh; heal_kill: from the kill instead;
#   torchft   torchft 0.2.0's own heal (tools/recovery_bench/torchft_heal.py:
#             its Lighthouse and Managers, 3 replica groups x 2 ranks on Gloo,
#             the killed group restarted whole, its state fetched from a
#             peer over torchft's HTTP checkpoint transport); from the
#             restarted group ready (Managers constructed) to the last of the
#             6 ranks' first committed step with 3 replicas; torchft_kill:
#             from the kill instead.
# torchrun and torchft need the torch venv (tools/install_torch.sh); without
# it they are skipped with a line saying so. Prints each trial and a table:
# p50, p95, max per way, and ratios of medians (a 95% bootstrap interval):
# shrink to relaunch and torchrun, heal to torchft, heal_kill to torchrun and
# torchft_kill. Every launch is bounded by `timeout`; temporary files live
# in a directory removed at exit; nothing is left running.
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
  //tools/recovery_bench:heal_main >/dev/null 2>&1 || { echo "recovery_bench: build failed" >&2; exit 1; }
OUT="$(bazel info -c opt bazel-bin 2>/dev/null)"
BIN="$OUT/examples/elastic/elastic_training_main"
LAUNCH="$OUT/bootstrap/launch"
HEAL="$OUT/tools/recovery_bench/heal_main"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torchft' 2>/dev/null; then
  TORCHFT="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torchft"))')"
  echo "torchft $TORCHFT, torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') from $VENV"
else
  TORCHFT=""
  echo "torchft column skipped: no torchft in $VENV (run tools/install_torch.sh)"
fi
[ -x "$VENV/bin/torchrun" ] || echo "torchrun column skipped: no $VENV/bin/torchrun (run tools/install_torch.sh)"
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

  # heal (devmesh)
  timeout 120 "$LAUNCH" --nproc=6 --host_store --keep_going --spare_restarts=1 \
    -- "$HEAL" --kill_rank=2 >"$WORK/heal.out" 2>&1
  read -r ms4 ms5 < <(python3 - "$WORK/heal.out" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
kill = [int(x) for x in re.findall(r"kill_ns=(\d+)", t)]
ready = [int(x) for x in re.findall(r"spare_ready_ns=(\d+)", t)]
full = [int(x) for x in re.findall(r"full_step_ns=(\d+)", t)]
good = t.count("equal a fresh run's")
if len(kill) != 1 or len(ready) != 2 or len(full) != 6 or good != 6:
    print("fail fail")
else:
    print("%.1f %.1f" % ((max(full) - max(ready)) / 1e6,
                         (max(full) - kill[0]) / 1e6))
PY
)
  echo "heal $ms4" >>"$RESULTS"
  echo "heal_kill $ms5" >>"$RESULTS"

  # torchft
  ms6=skipped
  ms7=skipped
  if [ -n "$TORCHFT" ]; then
    line="$(WORK_DIR="$WORK" TRIAL_LIMIT_S=150 timeout 200 "$VENV/bin/python" \
      tools/recovery_bench/torchft_heal.py 2>"$WORK/torchft.err" | tail -1)"
    ms6="$(sed -n 's/^heal_ms=\([0-9.]*\) .*/\1/p' <<<"$line")"
    ms7="$(sed -n 's/.*kill_to_full_ms=\([0-9.]*\).*/\1/p' <<<"$line")"
    if [ -z "$ms6" ] || [ -z "$ms7" ]; then
      echo "torchft trial $t failed: ${line:-no output (killed at 200 s?)}" | cut -c1-2000
      ms6=fail
      ms7=fail
    fi
    echo "torchft $ms6" >>"$RESULTS"
    echo "torchft_kill $ms7" >>"$RESULTS"
  fi
  echo "trial $t: shrink $ms ms, relaunch $ms2 ms, torchrun $ms3 ms," \
    "heal $ms4 ms (from the kill $ms5), torchft $ms6 ms (from the kill $ms7)"
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
print("%-12s %6s %8s %8s %8s" % ("way", "trials", "p50 ms", "p95 ms", "max ms"))
good = {}
for way in ("shrink", "relaunch", "torchrun", "heal", "heal_kill", "torchft",
            "torchft_kill"):
    if way not in rows:
        continue
    ok = [float(x) for x in rows[way] if x != "fail"]
    failed += len(rows[way]) - len(ok)
    good[way] = ok
    if ok:
        print("%-12s %6d %8.1f %8.1f %8.1f" % (way, len(rows[way]), med(ok), pct(ok, 0.95), max(ok)))
    else:
        print("%-12s %6d   all failed" % (way, len(rows[way])))
random.seed(1)
for way, base in (("shrink", "relaunch"), ("shrink", "torchrun"),
                  ("heal", "torchft"), ("heal_kill", "torchrun"),
                  ("heal_kill", "torchft_kill")):
    a, b = good.get(way), good.get(base)
    if not a or not b:
        continue
    boots = []
    for _ in range(2000):
        ra = [random.choice(a) for _ in a]
        rb = [random.choice(b) for _ in b]
        boots.append(med(ra) / med(rb))
    boots.sort()
    print("%-9s / %-12s p50 ratio %.3f (95%% interval %.3f-%.3f)" % (
        way, base, med(a) / med(b), boots[int(0.025 * len(boots))],
        boots[int(0.975 * len(boots)) - 1]))
print("failed trials: %d" % failed)
sys.exit(1 if failed else 0)
PY
