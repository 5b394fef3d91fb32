#!/usr/bin/env bash
# tools/cross_host_bench.sh: the per-dim all-reduce of a 2x2 mesh whose dp
# dim crosses hosts, devmesh against PyTorch's DeviceMesh, in one run. The
# two hosts are tools/launcher_check's network-namespace hosts (hosts.sh:
# each its own address, host name and /dev/shm, joined by a veth pair);
# ranks 0-1 on host 1, 2-3 on host 2, started by hand with torchrun's
# variables (tools/launcher_check/by_hand.sh), rank r bound to core r mod 2
# (allreduce_2d binds itself by LOCAL_RANK; PyTorch's ranks through taskset).
# So dp's groups {0,2} {1,3} cross hosts (devmesh: its default cross-host
# backend, UCX over TCP; PyTorch: Gloo) and tp's {0,1} {2,3} stay inside one (devmesh: shared memory;
# PyTorch: Gloo over loopback). PyTorch's ranks get GLOO_SOCKET_IFNAME=dmlc0
# (its Gloo would otherwise bind the host name's loopback address); devmesh's
# get nothing beyond torchrun's variables.
#
# Both sides measure as tools/peer_bench.sh's allreduce section does
# (allreduce_2d --target_ci=0 and tools/peer_bench/torch_allreduce.py: runs
# of clamp(ceil(8 MiB / bytes), 1, 100) back-to-back all-reduces after a
# barrier, the slowest rank's run / batch, the median over runs, a fresh
# pattern checked afterwards). The sides take turns going first in each
# round; the table gives each side's median over rounds (us per all-reduce)
# and the ratio PyTorch / devmesh of the medians, with the range of the
# per-round ratios.
#
# With the 2x2 mesh each round also runs bench/tcp_allreduce_floor on the same
# hosts and cores: dp's two pairs doing a 2-member all-reduce over one TCP
# connection each with only the bytes, copies and reduction it needs. Its
# columns: floor_us (its time, as measured for the other sides) and
# floor_cpu_us (both members' CPU time per all-reduce: the pair shares one
# core, so it bounds the time of any all-reduce doing that work there), and
# PT/cpu = torch_us / floor_cpu_us, the most such an all-reduce could be ahead
# of PyTorch on this machine.
#
#   sudo tools/cross_host_bench.sh [--rounds=3] [--sizes=1024,65536,1048576]
#                                  [--iters=10] [--out=FILE]
#                                  [--devmesh_env='NAME=VALUE ...']
#                                  [--devmesh_base_env='NAME=VALUE ...']
#                                  [--devmesh_env_flags='--FLAG=VALUE ...']
#                                  [--mesh_shape=2x2]
#
# --devmesh_env runs devmesh a second time in each round with those
# variables set (one or more NAME=VALUE separated by spaces; e.g.
# DEVMESH_CROSS_HOST_BACKEND=gloo: Gloo across hosts, which allreduce_2d
# links; or 'DEVMESH_CROSS_HOST_BACKEND=gloo DEVMESH_GLOO_SYNC_MAX_BYTES=0':
# Gloo's event-loop route at every size), taking its turn with the
# other two, and adds its column and its ratio to devmesh's (env/dm, with
# the per-round range). --devmesh_base_env sets variables for devmesh's main
# column the same way (both devmesh columns then differ only where the two
# settings do). --devmesh_env_flags adds allreduce_2d flags to the
# --devmesh_env column's command (e.g. --verify_calls=false: with
# DEVMESH_CROSS_HOST_BACKEND=gloo in both env settings, env/dm is the Gloo
# dim's time without the per-call check over its time with it).
#
# --mesh_shape=4x1 makes dp the whole job, 2 members on each host (tp has
# one member): with 'DEVMESH_CROSS_HOST_BACKEND=ucx DEVMESH_TWO_LEVEL=0' as
# the base and '... DEVMESH_TWO_LEVEL=1' as the env column, env/dm is the
# two-level all-reduce's time over the flat UCX group's (docs/two_level.md).
#
# Needs root (namespaces), iproute2 and util-linux (tools/install.sh) and the
# torch venv (tools/install_torch.sh; $DEVMESH_TORCH_VENV, default
# /opt/devmesh/torch-venv). Every launch is bounded by `timeout -k` and runs
# in a process group of its own; after each, whatever it left on either host
# is killed; the namespaces this script made are removed by a trap (also on
# SIGINT/SIGTERM, at once). Exit status 1 when a launch fails, a side gives a
# wrong element, or any (dim, size) row is missing on either side; 2 for bad
# arguments or a missing prerequisite.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT="$PWD"
source "$ROOT/tools/launcher_check/hosts.sh"

rounds=3
sizes="1024,16384,262144,1048576,4194304,16777216"
iters=10
out=""
devmesh_env=""
devmesh_base_env=""
devmesh_env_flags=""
mesh_shape=2x2
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#--rounds=} ;;
    --sizes=*) sizes=${arg#--sizes=} ;;
    --iters=*) iters=${arg#--iters=} ;;
    --out=*) out=${arg#--out=} ;;
    --devmesh_env=*) devmesh_env=${arg#--devmesh_env=} ;;
    --devmesh_base_env=*) devmesh_base_env=${arg#--devmesh_base_env=} ;;
    --devmesh_env_flags=*) devmesh_env_flags=${arg#--devmesh_env_flags=} ;;
    --mesh_shape=2x2|--mesh_shape=4x1) mesh_shape=${arg#--mesh_shape=} ;;
    -h|--help) sed -n '2,56p' "$0"; exit 0 ;;
    *) echo "cross_host_bench.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "cross_host_bench.sh: needs root (network and mount namespaces)" >&2
  exit 2
fi
venv="${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}"
if ! [ -x "$venv/bin/python" ]; then
  echo "cross_host_bench.sh: no torch venv at $venv (tools/install_torch.sh)" >&2
  exit 2
fi

WORK="$(mktemp -d /tmp/cross_host_bench.XXXXXX)" || exit 1
chmod 755 "$WORK"
HOSTS_UP=0   # set once lc_hosts_up ran: only then are the namespaces ours
STEP_PID=""  # the launch in flight, killed by the trap
cleanup() {
  if [ -n "$STEP_PID" ]; then kill -- "-$STEP_PID" 2>/dev/null || kill "$STEP_PID" 2>/dev/null || true; fi
  if [ "$HOSTS_UP" -eq 1 ]; then lc_hosts_down; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# step LOG CMD...: runs CMD in the background in a process group of its own
# (so that the trap can end it and everything it started, and so that a
# signal to this script is handled at once: `wait` is interruptible), bounded
# by `timeout -k`; then ends whatever the launch left on either host, so
# that no rank keeps MASTER_PORT for the next launch.
step() {
  local log="$1"; shift
  setsid timeout -k 10 600 "$@" >"$log" 2>&1 &
  STEP_PID=$!
  wait "$STEP_PID"
  local rc=$?
  STEP_PID=""
  lc_host_kill_all 1 >/dev/null 2>&1 || true
  lc_host_kill_all 2 >/dev/null 2>&1 || true
  return $rc
}

echo "cross_host_bench: building //bench:allreduce_2d and :tcp_allreduce_floor (-c opt)" >&2
timeout -k 10 1200 bazel build -c opt //bench:allreduce_2d //bench:tcp_allreduce_floor \
  >"$WORK/build.log" 2>&1 || { tail -n 20 "$WORK/build.log" >&2; exit 1; }
# bazel-out/k8-opt, not bazel-bin: bazel-bin follows the checkout's last
# build's configuration (an asan or tsan build by someone else meanwhile).
mkdir -p "$WORK/bin" && cp bazel-out/k8-opt/bin/bench/allreduce_2d \
  bazel-out/k8-opt/bin/bench/tcp_allreduce_floor "$WORK/bin/" || exit 1
HOSTS_UP=1
lc_hosts_up || { echo "cross_host_bench.sh: the namespace hosts did not come up" >&2; exit 1; }
H1="$(lc_host_addr 1)"
H2="$(lc_host_addr 2)"
max=0
for s in ${sizes//,/ }; do [ "$s" -gt "$max" ] && max=$s; done
filter="^allreduce_2d/[^/]+/(${sizes//,/|})/"

run_devmesh() {  # LOG
  step "$1" "$ROOT/tools/launcher_check/by_hand.sh" "$H1" \
    env $devmesh_base_env \
    "$WORK/bin/allreduce_2d" --mesh_shape="$mesh_shape" --mesh_dim_names=dp,tp \
    --dtype=float32 --min_bytes=1024 --max_bytes="$max" --iters="$iters" \
    --warmup=3 --target_ci=0 --benchmark_filter="$filter"
}
run_devmesh_env() {  # LOG
  step "$1" "$ROOT/tools/launcher_check/by_hand.sh" "$H1" \
    env $devmesh_env "$WORK/bin/allreduce_2d" --mesh_shape="$mesh_shape" \
    --mesh_dim_names=dp,tp --dtype=float32 --min_bytes=1024 \
    --max_bytes="$max" --iters="$iters" --warmup=3 --target_ci=0 \
    --benchmark_filter="$filter" $devmesh_env_flags
}
run_torch() {  # LOG
  step "$1" "$ROOT/tools/launcher_check/by_hand.sh" "$H1" \
    env GLOO_SOCKET_IFNAME="$LC_IFACE" sh -c \
    'exec taskset -c "$LOCAL_RANK" "$0" "$@"' "$venv/bin/python" \
    "$ROOT/tools/peer_bench/torch_allreduce.py" --shape "$mesh_shape" --names dp,tp \
    --sizes "$sizes" --iters "$iters" --warmup 3
}

run_floor() {  # LOG: only the 2x2 mesh's dp pairs (tcp_allreduce_floor.cc)
  step "$1" "$ROOT/tools/launcher_check/by_hand.sh" "$H1" \
    "$WORK/bin/tcp_allreduce_floor" --peer_host="$H2" --sizes="$sizes" \
    --iters="$iters" --warmup=3
}
floor_side=""
[ "$mesh_shape" = "2x2" ] && floor_side=" floor"

failed=0
for r in $(seq 1 "$rounds"); do
  if [ -n "$devmesh_env" ]; then
    case $((r % 3)) in
      1) order="devmesh devmesh_env torch" ;;
      2) order="devmesh_env torch devmesh" ;;
      *) order="torch devmesh devmesh_env" ;;
    esac
  elif [ $((r % 2)) -eq 1 ]; then order="devmesh torch"; else order="torch devmesh"; fi
  order="$order$floor_side"
  for side in $order; do
    if ! "run_$side" "$WORK/$side.$r.log"; then
      echo "cross_host_bench: $side round $r failed:" >&2
      tail -n 20 "$WORK/$side.$r.log" >&2
      failed=1
    fi
  done
  echo "cross_host_bench: round $r/$rounds done ($order)" >&2
done
[ $failed -eq 0 ] || exit 1

python3 - "$WORK" "$rounds" "$out" "$sizes" "$devmesh_env" "$mesh_shape" "$devmesh_base_env" <<'EOF'
import json, os, re, statistics, sys
work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
env = sys.argv[5]
shape, base_env = sys.argv[6], sys.argv[7]
dm_sides = ["devmesh"] + (["devmesh_env"] if env else [])
want = {(d, int(b)) for d in ("dp", "tp") for b in sys.argv[4].split(",")}
row = re.compile(r"^\s+(\d+)\s+\d+\s+(dp|tp)\s+\d+\s+\d+\s+\d+\s+([\d.]+)\s+"
                 r"[\d.]+\s+[\d.]+\s+(\d+)")
times = {"devmesh": {}, "devmesh_env": {}, "torch": {}, "floor": {},
         "floor_cpu": {}}
floor = shape == "2x2"
wrong = 0
backends = []
env_backends = []
for r in range(1, rounds + 1):
    for side in dm_sides:
        for line in open(os.path.join(work, "%s.%d.log" % (side, r))):
            m = row.match(line)
            if m:
                key = (m.group(2), int(m.group(1)))
                times[side].setdefault(key, []).append(float(m.group(3)))
                wrong += int(m.group(4))
            elif line.startswith("# dim ") and r == 1:
                (backends if side == "devmesh" else env_backends).append(
                    line[2:].strip())
    for line in open(os.path.join(work, "torch.%d.log" % r)):
        if line.startswith("PEER_BENCH_ALLREDUCE "):
            c = json.loads(line.split(" ", 1)[1])
            key = (c["dim"], c["bytes"])
            times["torch"].setdefault(key, []).append(c["seconds"] * 1e6)
            wrong += c["wrong"]
    if floor:
        # One line per dp pair; the round's time is the slower pair's.
        per_round, cpu_round = {}, {}
        for line in open(os.path.join(work, "floor.%d.log" % r)):
            if line.startswith("TCP_FLOOR "):
                c = json.loads(line.split(" ", 1)[1])
                key = ("dp", c["bytes"])
                per_round[key] = max(per_round.get(key, 0), c["seconds"] * 1e6)
                cpu_round[key] = max(cpu_round.get(key, 0),
                                     c["pair_cpu_seconds"] * 1e6)
                wrong += c["wrong"]
        for key, us in per_round.items():
            times["floor"].setdefault(key, []).append(us)
            times["floor_cpu"].setdefault(key, []).append(cpu_round[key])
missing = []
for side in dm_sides + ["torch"] + (["floor"] if floor else []):
    for key in sorted(want):
        if side == "floor" and key[0] != "dp":
            continue
        got = len(times[side].get(key, []))
        if got != rounds:
            missing.append("%s %s %d B: %d of %d rounds" % (side, key[0], key[1],
                                                           got, rounds))
if missing:
    print("cross_host_bench: rows missing (a format change or a failed "
          "launch?): " + "; ".join(missing), file=sys.stderr)
    sys.exit(1)
layout = ("2x2 mesh, dp across two network-namespace hosts, tp inside each"
          if shape == "2x2" else
          "4x1 mesh, dp the 4 ranks, 2 on each of two network-namespace hosts")
lines = ["# %s; float32 sum, %d rounds, us per all-reduce (median over rounds)"
         % (layout, rounds),
         "# devmesh: " + "; ".join(backends) +
         "; PyTorch: Gloo on both dims (GLOO_SOCKET_IFNAME=%s)" % "dmlc0"]
if base_env:
    lines.append("# devmesh_us with %s" % base_env)
if floor:
    lines.append("# floor_us: bench/tcp_allreduce_floor, the dp pairs' 2-member "
                 "all-reduce over one TCP connection with only the bytes, copies "
                 "and reduction it needs, on the same cores (both members of a "
                 "pair share one); floor_cpu_us: the CPU time both members of "
                 "the pair spend on it, a bound under the wall time of any "
                 "all-reduce that does that work on one core; PT/cpu = "
                 "torch_us / floor_cpu_us, the most such an all-reduce could be "
                 "ahead of PyTorch here")
if env:
    lines.append("# env_us: devmesh again with %s, in its own turn each round: "
                 "%s" % (env, "; ".join(env_backends)))
head = "%-4s %10s %12s %12s %8s %17s" % ("dim", "bytes", "devmesh_us",
                                          "torch_us", "PT/dm", "per-round range")
if env:
    head += " %12s %8s %17s" % ("env_us", "env/dm", "per-round range")
if floor:
    head += " %10s %12s %8s" % ("floor_us", "floor_cpu_us", "PT/cpu")
lines.append(head)
for key in sorted(want):
    d, t = times["devmesh"][key], times["torch"][key]
    ratios = [b / a for a, b in zip(d, t)]
    text = "%-4s %10d %12.1f %12.1f %8.2f %8.2f-%-8.2f" % (
        key[0], key[1], statistics.median(d), statistics.median(t),
        statistics.median(t) / statistics.median(d), min(ratios), max(ratios))
    if env:
        e = times["devmesh_env"][key]
        er = [b / a for a, b in zip(d, e)]
        text += " %12.1f %8.2f %8.2f-%-8.2f" % (
            statistics.median(e), statistics.median(e) / statistics.median(d),
            min(er), max(er))
    if floor and key[0] == "dp":
        f = statistics.median(times["floor"][key])
        fc = statistics.median(times["floor_cpu"][key])
        text += " %10.1f %12.1f %8.2f" % (f, fc, statistics.median(t) / fc)
    lines.append(text)
lines.append("# wrong elements, every side, every round: %d" % wrong)
text = "\n".join(lines)
print(text)
if out:
    open(out, "w").write(text + "\n")
sys.exit(1 if wrong else 0)
EOF
