#!/usr/bin/env bash
# tools/launcher_check.sh: the launcher table, tested end to end with the real
# launchers: Open MPI's mpirun, Slurm's srun (a cluster this script starts and
# stops), torchrun, on one host and on two "hosts" (network namespaces joined
# by a veth pair, each with its own address, host name and /dev/shm; see
# tools/launcher_check/hosts.sh). Each check starts
# //tools/launcher_check:mesh_check (a 2 x 2 mesh, rank ids all-reduced along
# each dim, exact sums checked) or //bench:allreduce_2d in a short mode, and
# reads back what every rank printed, each dim's backend included ("shm"
# inside a host, "ucx" across, "gloo" across in the Gloo rows, which set
# DEVMESH_CROSS_HOST_BACKEND=gloo: both binaries link //comm:gloo). Under mpirun
# and srun it also runs //examples/elastic:elastic_training_main over a
# //store:server with rank 2 SIGKILLed: the survivors Shrink, and, in the
# heal rows, the dead rank is started again as a spare beside the job
# (tools/launcher_check/heal_with_spare.sh) and grown back in. Prints one
# table and exits non-zero when any check fails. Namespaces (network, and
# mount with each host's /dev/shm tmpfs), daemons and processes it started
# are removed by a trap, also when a step fails or the script is
# interrupted; every step is bounded by `timeout`.
#
#   sudo tools/launcher_check.sh          (root: namespaces, slurmd, munged)
#
# Needs: openmpi-bin, slurm-wlm, munge, iproute2 (tools/install.sh) and the
# torch venv (tools/install_torch.sh; $DEVMESH_TORCH_VENV, default
# /opt/devmesh/torch-venv) for the torchrun rows, which are reported as
# skipped without it, or failed when DEVMESH_REQUIRE_TORCH=1.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
HERE="$ROOT/tools/launcher_check"
source "$HERE/hosts.sh"
source "$HERE/slurm.sh"
ON_HOST="$HERE/on_host.sh"

STEP_TIMEOUT="${LC_STEP_TIMEOUT:-150}"  # seconds, any one launch
MESH_TIMEOUT=30                         # the mesh's own timeout (mesh_check)
TORCH_VENV="${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent="$HERE/rsh_agent.sh"
# Open MPI's own traffic stays on the namespaces' addresses or loopback.
export OMPI_MCA_btl=self,tcp OMPI_MCA_oob_tcp_if_include=lo,dmlc0 \
  OMPI_MCA_btl_tcp_if_include=lo,dmlc0

WORK="$(mktemp -d /tmp/launcher_check.XXXXXX)"
chmod 755 "$WORK"  # munged wants its socket's directories searchable
ROWS=()
NOTES=()   # printed under the table
FAILURES=0

STORE_PID=""
cleanup() {
  if [ -n "$STEP_PID" ]; then kill "$STEP_PID" 2>/dev/null || true; fi
  if [ -n "$STORE_PID" ]; then kill "$STORE_PID" 2>/dev/null || true; fi
  lc_slurm_down
  lc_hosts_down
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }

# ---- What every rank printed ----------------------------------------------

# dims_inside LOG: the dims rank 0 reported inside one host, comma-joined.
dims_inside() {
  grep -E '^mesh_check rank=0 dim=' "$1" | grep 'inside_host=yes' |
    sed -E 's/.* dim=([^ ]+) .*/\1/' | paste -sd, -
}

# backends LOG: per dim (in the order the ranks print them), the backends
# the ranks reported, e.g. "dp=gloo,tp=shm"; "dp=gloo|shm" when ranks differ.
backends() {
  grep -E '^mesh_check rank=[0-9]+ dim=' "$1" |
    awk '{ d = ""; b = "?"
           for (i = 1; i <= NF; i++) {
             if ($i ~ /^dim=/) d = substr($i, 5)
             if ($i ~ /^backend=/) b = substr($i, 9)
           }
           if (!(d in got)) { order[++n] = d; got[d] = b }
           else if (index("|" got[d] "|", "|" b "|") == 0) got[d] = got[d] "|" b }
         END { for (i = 1; i <= n; i++) printf "%s%s=%s", (i > 1 ? "," : ""), order[i], got[order[i]]
               print "" }'
}

# sums_right LOG: "yes" when every rank printed both dims with sum == want
# and result=ok.
sums_right() {
  local log="$1"
  local lines good oks
  lines=$(grep -cE '^mesh_check rank=[0-9]+ dim=' "$log")
  good=$(grep -E '^mesh_check rank=[0-9]+ dim=' "$log" |
    awk '{ s=""; w=""; for (i=1;i<=NF;i++) { if ($i ~ /^sum=/) s=substr($i,5); if ($i ~ /^want=/) w=substr($i,6) } if (s!="" && s==w) n++ } END { print n+0 }')
  oks=$(grep -cE '^mesh_check rank=[0-9]+ result=ok' "$log")
  if [ "$lines" -eq 8 ] && [ "$good" -eq 8 ] && [ "$oks" -eq 4 ]; then echo yes; else echo "no ($good/8 sums, $oks/4 ok)"; fi
}

add_row() {  # launcher hosts mesh inside backends sums seconds result
  ROWS+=("$(printf '| %s | %s | %s | %s | %s | %s | %s | %s |' "$@")")
  case "$8" in
    pass*|skipped*) ;;
    *) FAILURES=$((FAILURES + 1)) ;;
  esac
}

# run LOG COMMAND...: runs COMMAND bounded by STEP_TIMEOUT; sets RC, SECS.
# The step runs in the background and is waited for, so that a signal to
# this script runs its trap at once (bash defers traps until a foreground
# command ends); cleanup() stops the step.
STEP_PID=""
run() {
  local log="$1"; shift
  local t0; t0=$(now)
  timeout --kill-after=10 "$STEP_TIMEOUT" "$@" > "$log" 2>&1 &
  STEP_PID=$!
  wait "$STEP_PID"
  RC=$?
  STEP_PID=""
  SECS=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
}

show_log() { echo "---- $1 (last 25 lines)"; tail -n 25 "$1"; echo "----"; }

# check_mesh NAME LAUNCHER HOSTS MESH WANT_INSIDE WANT_BACKENDS LOG: a 2 x 2
# run that must pass with the dims WANT_INSIDE reported inside a host and
# every rank's groups on the backends WANT_BACKENDS ("dp=ucx,tp=shm").
check_mesh() {
  local name="$1" launcher="$2" hosts="$3" mesh="$4" want="$5"
  local want_backends="$6" log="$7"
  local inside got_backends sums result=pass
  inside=$(dims_inside "$log"); sums=$(sums_right "$log")
  got_backends=$(backends "$log")
  if [ "$RC" -ne 0 ]; then result="FAIL (exit $RC)"
  elif [ "$sums" != yes ]; then result="FAIL (sums)"
  elif [ "$inside" != "$want" ]; then result="FAIL (inside '$inside', want '$want')"
  elif [ "$got_backends" != "$want_backends" ]; then
    result="FAIL (backends '$got_backends', want '$want_backends')"
  fi
  [ -n "${EXTRA_FAIL:-}" ] && result="FAIL ($EXTRA_FAIL)"
  add_row "$launcher" "$hosts" "$mesh" "${inside:--}" "${got_backends:--}" \
    "$sums" "$SECS" "$result"
  [ "$result" = pass ] || show_log "$log"
  EXTRA_FAIL=""
}

# check_killed LAUNCHER HOSTS LOG: rank 3 SIGKILLed itself; the launcher must
# exit non-zero, within the mesh timeout (plus start-up), and at least one
# other rank must have ended with an error that names a peer (Gloo names the
# peer's address; UCX and the failure watch its global rank).
check_killed() {
  local launcher="$1" hosts="$2" log="$3" result=pass
  local errors named
  errors=$(grep -cE '^mesh_check rank=[0-2] result=error' "$log")
  named=$(grep -E '^mesh_check rank=[0-2] result=error' "$log" |
    grep -cE 'peer|global rank [0-9]|\[[0-9.]+\]:[0-9]+')
  if [ "$RC" -eq 0 ]; then result="FAIL (launcher exit 0)"
  elif [ "$named" -lt 1 ]; then result="FAIL (no rank named a peer)"
  elif awk -v s="$SECS" -v t="$MESH_TIMEOUT" 'BEGIN { exit !(s > t + 20) }'; then
    result="FAIL (took ${SECS} s, mesh timeout ${MESH_TIMEOUT} s)"
  fi
  NOTES+=("$launcher, rank 3 killed: $(grep -E '^mesh_check rank=[0-2] result=error' "$log" | head -n 1)")
  add_row "$launcher, rank 3 killed" "$hosts" "2x2 dp,tp" "-" "-" \
    "exit $RC; $errors other rank(s) failed, $named naming a peer" "$SECS" "$result"
  [ "$result" = pass ] || show_log "$log"
}

# Survivors after a death (issue 20): the elastic example
# (//examples/elastic) on a (dp=3, tp=2) mesh of 6 ranks, rank 2 SIGKILLed at
# step 10, over a //store:server that no rank hosts (DEVMESH_STORE_ADDR).
# start_store / stop_store: that server on host 1, a fresh one per job (its
# keys are not namespaced); its address in STORE_ADDR.
start_store() {
  # The last server's log goes first: its "listening on" line would be read
  # before the new server's redirection truncates the file (seen: a job sent
  # to the stopped server's port, every rank "Connection refused").
  rm -f "$WORK/store.log"
  "$ON_HOST" 1 "$WORK/bin/server" --port=0 > "$WORK/store.log" 2>&1 &
  STORE_PID=$!
  local i
  for i in $(seq 100); do grep -qs "listening on" "$WORK/store.log" && break; sleep 0.1; done
  STORE_ADDR="$H1:$(grep -o 'listening on .*' "$WORK/store.log" | grep -o '[0-9]*$')"
}
stop_store() {
  [ -n "$STORE_PID" ] && kill "$STORE_PID" 2>/dev/null && wait "$STORE_PID" 2>/dev/null
  STORE_PID=""
}
# check_elastic LAUNCHER HOSTS LOG: the four survivors must end with a fresh
# run's parameters (2 replicas from the step they resumed at) and rank 3, the
# live rank of the lost replica, must say it was removed.
check_elastic() {
  local launcher="$1" hosts="$2" log="$3" result=pass good removed
  good=$(grep -c "equal a fresh run's" "$log")
  removed=$(grep -c "global rank 3 was removed in epoch 1" "$log")
  if [ "$good" -ne 4 ] || [ "$removed" -ne 1 ]; then
    result="FAIL ($good/4 survivors trained on, $removed/1 told it was removed)"
  fi
  add_row "$launcher, rank 2 killed, Shrink" "$hosts" "3x2 dp,tp" "-" "-" \
    "$good survivors equal a fresh run, $removed removed; exit $RC" "$SECS" "$result"
  [ "$result" = pass ] || show_log "$log"
}

# Heal (issue 38): the same job with --heal; the live rank of the lost
# replica stays as a spare, and the dead rank is started again as a spare
# beside the job by tools/launcher_check/heal_with_spare.sh (the job's store
# address, the dead rank's variables, DEVMESH_SPARE=1), since neither
# launcher restarts a failed rank itself. check_heal LAUNCHER HOSTS PREFIX
# (PREFIX_job.log, PREFIX_spare.log): the four members must grow back to 3
# replicas, both spares be admitted, and all six end with a fresh run's
# parameters (3, 2, then 3 replicas).
check_heal() {
  local launcher="$1" hosts="$2" job="$3_job.log" spare="$3_spare.log"
  local result=pass grew admitted good
  grew=$(grep -c "grew at step" "$job")
  admitted=$(cat "$job" "$spare" | grep -c "admitted as a spare")
  good=$(cat "$job" "$spare" | grep -c "equal a fresh run's")
  if [ "$grew" -ne 4 ] || [ "$admitted" -ne 2 ] || [ "$good" -ne 6 ]; then
    result="FAIL ($grew/4 members grew, $admitted/2 spares admitted, $good/6 equal a fresh run)"
  fi
  add_row "$launcher" "$hosts" "3x2 dp,tp" "-" "-" \
    "$grew members grew, $admitted spares admitted, $good equal a fresh run; $(grep -m1 '^heal_with_spare:' "$3.log")" \
    "$SECS" "$result"
  [ "$result" = pass ] || { show_log "$3.log"; show_log "$job"; show_log "$spare"; }
}
# SPARE_ENV RANK LOCAL_RANK LOCAL_WORLD: the variables of the dead rank
# started again by hand as a spare of the 6-rank job (torchrun's family,
# which takes precedence over the launcher's own variables).
spare_env() {
  echo env RANK="$1" WORLD_SIZE=6 LOCAL_RANK="$2" LOCAL_WORLD_SIZE="$3" \
    DEVMESH_STORE_ADDR="$STORE_ADDR" DEVMESH_SPARE=1
}

# slurm_agrees LOG: every rank's reading of Slurm's variables against Slurm's
# own answers: the store host is the first of `scontrol show hostnames
# $SLURM_JOB_NODELIST`, the local world size is this node's entry of
# SLURM_TASKS_PER_NODE ("2(x2)" -> 2 2) and the world size their sum.
# Prints nothing when all agree, else what differs.
slurm_agrees() {
  local log="$1" line
  while read -r line; do
    local rank store host nodelist tpn nodeid lw world first i entry count
    rank=$(sed -E 's/^mesh_check rank=([0-9]+) .*/\1/' <<<"$line")
    store=$(grep -oE ' store=[^ ]+' <<<"$line" | cut -d= -f2)
    host=${store%:*}
    nodelist=$(grep -oE ' SLURM_JOB_NODELIST=[^ ]+' <<<"$line" | cut -d= -f2)
    tpn=$(grep -oE ' SLURM_TASKS_PER_NODE=[^ ]+' <<<"$line" | cut -d= -f2)
    nodeid=$(grep -oE ' SLURM_NODEID=[^ ]+' <<<"$line" | cut -d= -f2)
    lw=$(grep -oE ' local_world=[^ ]+' <<<"$line" | cut -d= -f2)
    world=$(grep -oE ' world=[^ ]+' <<<"$line" | cut -d= -f2)
    first=$(lc_on_host 1 scontrol show hostnames "$nodelist" | head -n 1)
    local -a per_node=()
    IFS=, read -ra entries <<<"$tpn"
    for entry in "${entries[@]}"; do
      if [[ "$entry" =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
        for ((i = 0; i < BASH_REMATCH[2]; i++)); do per_node+=("${BASH_REMATCH[1]}"); done
      else
        per_node+=("$entry")
      fi
    done
    count=0; for entry in "${per_node[@]}"; do count=$((count + entry)); done
    [ "$host" = "$first" ] || echo "rank $rank store host $host, scontrol says $first"
    [ "$lw" = "${per_node[$nodeid]:-?}" ] ||
      echo "rank $rank local world $lw, SLURM_TASKS_PER_NODE=$tpn node $nodeid says ${per_node[$nodeid]:-?}"
    [ "$world" = "$count" ] || echo "rank $rank world $world, SLURM_TASKS_PER_NODE sums to $count"
  done < <(grep -E '^mesh_check rank=[0-9]+ env ' "$log")
}

# ---- The checks -----------------------------------------------------------

echo "launcher_check: building //tools/launcher_check:mesh_check //bench:allreduce_2d //examples/elastic:elastic_training_main //store:server"
timeout 1200 bazel build //tools/launcher_check:mesh_check //bench:allreduce_2d \
  //examples/elastic:elastic_training_main //store:server ||
  { echo "launcher_check: build failed" >&2; exit 1; }
mkdir -p "$WORK/bin"
cp bazel-bin/tools/launcher_check/mesh_check bazel-bin/bench/allreduce_2d \
  bazel-bin/examples/elastic/elastic_training_main bazel-bin/store/server "$WORK/bin/"
ELASTIC="$WORK/bin/elastic_training_main"
CHECK="$WORK/bin/mesh_check --timeout_s=$MESH_TIMEOUT"
H1="$(lc_host_addr 1)"

echo "launcher_check: hosts $(lc_host_name 1) ($H1) and $(lc_host_name 2) ($(lc_host_addr 2))"
lc_hosts_up || { echo "launcher_check: could not make the namespace hosts" >&2; exit 1; }

# Each host's own /dev/shm (hosts.sh): a file made there on host 1 is seen
# by another process on host 1, and not on host 1's second /dev/shm (1b),
# on host 2 or on the machine.
probe="launcher_check.$$"
t0=$(now)
seen=()
timeout 20 "$ON_HOST" 1 touch "/dev/shm/$probe"; RC=$?
for view in 1 1b 2; do
  if timeout 20 "$ON_HOST" "$view" test -e "/dev/shm/$probe"; then seen+=("$view:yes"); else seen+=("$view:no"); fi
done
if [ -e "/dev/shm/$probe" ]; then seen+=("machine:yes"); rm -f "/dev/shm/$probe"; else seen+=("machine:no"); fi
timeout 20 "$ON_HOST" 1 rm -f "/dev/shm/$probe"
SECS=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
result=pass
[ "$RC" -eq 0 ] && [ "${seen[*]}" = "1:yes 1b:no 2:no machine:no" ] ||
  result="FAIL (exit $RC, seen ${seen[*]}, want 1:yes 1b:no 2:no machine:no)"
add_row "private /dev/shm per host (on_host.sh)" 2 - - - \
  "file made on host 1, seen on ${seen[*]}" "$SECS" "$result"

# Open MPI, one host.
run "$WORK/mpi1.log" "$ON_HOST" 1 mpirun -np 4 --oversubscribe \
  -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 $CHECK
check_mesh mpi1 "mpirun -np 4" 1 "2x2 dp,tp" "dp,tp" "dp=shm,tp=shm" "$WORK/mpi1.log"

# The main benchmark under mpirun, short mode: every row's #wrong must be 0.
BENCH=("$WORK/bin/allreduce_2d" --min_bytes=1K --max_bytes=64K --iters=5
  --warmup=1 --target_ci=0)
# check_bench LAUNCHER HOSTS WANT_INSIDE WANT_BACKENDS LOG: 14 rows (7 sizes
# x 2 dims), #wrong 0 in each, the dims it reports inside a host and the
# backend of each dim ("# dim dp: ..., backend ucx").
check_bench() {
  local launcher="$1" hosts="$2" want="$3" want_backends="$4" log="$5"
  local rows wrong inside got_backends result=pass
  rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +(dp|tp) ' "$log")
  wrong=$(grep -E '^ +[0-9]+ +[0-9]+ +(dp|tp) ' "$log" | awk '{ s += $10 } END { print s + 0 }')
  inside=$(grep -E '^# dim [a-z]+: inside one host' "$log" | awk '{ print $3 }' | tr -d : | paste -sd, -)
  got_backends=$(grep -E '^# dim [a-z]+: .*, backend [a-z]+$' "$log" |
    sed -E 's/^# dim ([a-z]+): .*, backend ([a-z]+)$/\1=\2/' | paste -sd, -)
  if [ "$RC" -ne 0 ] || [ "$rows" -ne 14 ] || [ "$wrong" -ne 0 ]; then
    result="FAIL (exit $RC, $rows rows, $wrong wrong)"
  elif [ "$inside" != "$want" ]; then
    result="FAIL (inside '$inside', want '$want')"
  elif [ "$got_backends" != "$want_backends" ]; then
    result="FAIL (backends '$got_backends', want '$want_backends')"
  fi
  add_row "$launcher allreduce_2d (1K-64K)" "$hosts" "2x2 dp,tp" "${inside:--}" \
    "${got_backends:--}" "$rows rows, #wrong $wrong" "$SECS" "$result"
  [ "$result" = pass ] || show_log "$log"
}
run "$WORK/bench.log" "$ON_HOST" 1 mpirun -np 4 --oversubscribe \
  -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 "${BENCH[@]}"
check_bench "mpirun -np 4" 1 "dp,tp" "dp=shm,tp=shm" "$WORK/bench.log"
# --enable-recovery: mpirun lets the others run on after a death (without it
# the job is aborted; with --mca orte_abort_on_non_zero_status 0 instead,
# the survivors finish but mpirun 4.1 does not exit).
start_store
run "$WORK/mpi_elastic.log" "$ON_HOST" 1 mpirun -np 6 --oversubscribe \
  --enable-recovery -x DEVMESH_STORE_ADDR="$STORE_ADDR" "$ELASTIC" --kill_rank=2
stop_store
check_elastic "mpirun -np 6 --enable-recovery" 1 "$WORK/mpi_elastic.log"
# Heal: Open MPI 4.1's mpirun accepts --enable-recovery --max-restarts 1 but
# starts no failed process again (checked with 4.1.4: a SIGKILLed rank stays
# dead), so the spare is started beside the job, by hand.
start_store
run "$WORK/mpi_heal.log" "$HERE/heal_with_spare.sh" "$WORK/mpi_heal_job.log" \
  "$WORK/mpi_heal_spare.log" -- "$ON_HOST" 1 mpirun -np 6 --oversubscribe \
  --enable-recovery -x DEVMESH_STORE_ADDR="$STORE_ADDR" "$ELASTIC" --kill_rank=2 \
  --heal -- "$ON_HOST" 1 $(spare_env 2 2 6) "$ELASTIC" --kill_rank=2 --heal
stop_store
check_heal "mpirun -np 6 --enable-recovery, rank 2 killed, spare by hand, Grow" 1 "$WORK/mpi_heal"

# Slurm: the cluster of both hosts; one node, then both.
if lc_slurm_up "$WORK/slurm"; then
  run "$WORK/srun1.log" "$ON_HOST" 1 srun -N1 -n4 -w "$(lc_host_name 1)" --time=2 $CHECK
  EXTRA_FAIL=$(slurm_agrees "$WORK/srun1.log" | head -n 1)
  check_mesh srun1 "srun -N1 -n4" 1 "2x2 dp,tp" "dp,tp" "dp=shm,tp=shm" "$WORK/srun1.log"
  run "$WORK/srun2.log" "$ON_HOST" 1 srun -N2 --ntasks-per-node=2 --time=2 $CHECK
  EXTRA_FAIL=$(slurm_agrees "$WORK/srun2.log" | head -n 1)
  check_mesh srun2 "srun -N2 --ntasks-per-node=2" 2 "2x2 dp,tp" "tp" "dp=ucx,tp=shm" "$WORK/srun2.log"
  run "$WORK/srun_kill.log" "$ON_HOST" 1 srun -N2 --ntasks-per-node=2 --time=2 $CHECK --kill_rank=3
  check_killed "srun -N2 --ntasks-per-node=2" 2 "$WORK/srun_kill.log"
  start_store
  run "$WORK/srun_elastic.log" "$ON_HOST" 1 env DEVMESH_STORE_ADDR="$STORE_ADDR" \
    srun -N2 --ntasks-per-node=3 --time=2 --kill-on-bad-exit=0 "$ELASTIC" --kill_rank=2
  stop_store
  check_elastic "srun -N2 --ntasks-per-node=3 --kill-on-bad-exit=0" 2 "$WORK/srun_elastic.log"
  # Heal: srun never starts a failed task again; in one allocation the job
  # is one step and the spare a second step on host 1 (where rank 2 ran),
  # sharing its CPUs (--overlap). The default backend: the spare holds the
  # job's host table (spare_runtime.h), so it chooses each group's transport
  # as the members do (shared memory inside a host, UCX across).
  start_store
  run "$WORK/srun_heal.log" "$ON_HOST" 1 env DEVMESH_STORE_ADDR="$STORE_ADDR" \
    salloc -N2 --ntasks-per-node=3 --time=3 "$HERE/heal_with_spare.sh" \
    "$WORK/srun_heal_job.log" "$WORK/srun_heal_spare.log" -- \
    srun --kill-on-bad-exit=0 "$ELASTIC" --kill_rank=2 --heal -- \
    srun -N1 -n1 -w "$(lc_host_name 1)" --overlap $(spare_env 2 2 3) "$ELASTIC" \
    --kill_rank=2 --heal
  stop_store
  check_heal "salloc -N2 --ntasks-per-node=3: srun step, rank 2 killed, spare step, Grow" 2 "$WORK/srun_heal"
else
  add_row "srun (cluster start)" 2 - - - - - "FAIL (Slurm did not start)"
fi
lc_slurm_down

# Open MPI across the two hosts (a host list; the launch agent enters the
# other namespace where mpirun would ssh).
MPI2=("$ON_HOST" 1 mpirun -np 4 --host "$(lc_host_name 1):2,$(lc_host_name 2):2"
  -x MASTER_ADDR="$H1" -x MASTER_PORT=29500)
run "$WORK/mpi2.log" "${MPI2[@]}" $CHECK
check_mesh mpi2 "mpirun -np 4 --host dmh1:2,dmh2:2" 2 "2x2 dp,tp" "tp" "dp=ucx,tp=shm" "$WORK/mpi2.log"
run "$WORK/bench2.log" "${MPI2[@]}" "${BENCH[@]}"
check_bench "mpirun --host dmh1:2,dmh2:2" 2 "tp" "dp=ucx,tp=shm" "$WORK/bench2.log"
NOTES+=("allreduce_2d on 2 hosts: $(grep -E '^# dim ' "$WORK/bench2.log" | paste -sd';' -)")
# The same with Gloo across the hosts (opt-in: DEVMESH_CROSS_HOST_BACKEND=gloo,
# an agreed setting every rank sets; mesh_check and allreduce_2d link
# //comm:gloo): dp must be on gloo, exact sums, the benchmark's rows exact,
# and a SIGKILLed rank named by the others.
GLOO=(-x DEVMESH_CROSS_HOST_BACKEND=gloo)
run "$WORK/mpi2_gloo.log" "${MPI2[@]}" "${GLOO[@]}" $CHECK
check_mesh mpi2g "same, DEVMESH_CROSS_HOST_BACKEND=gloo" 2 "2x2 dp,tp" "tp" "dp=gloo,tp=shm" "$WORK/mpi2_gloo.log"
run "$WORK/bench2_gloo.log" "${MPI2[@]}" "${GLOO[@]}" "${BENCH[@]}"
check_bench "mpirun --host dmh1:2,dmh2:2, gloo" 2 "tp" "dp=gloo,tp=shm" "$WORK/bench2_gloo.log"
run "$WORK/mpi_kill_gloo.log" "${MPI2[@]}" "${GLOO[@]}" $CHECK --kill_rank=3
check_killed "mpirun --host dmh1:2,dmh2:2, gloo" 2 "$WORK/mpi_kill_gloo.log"
# Gloo's interface choice (GLOO_SOCKET_IFNAME), on Gloo.
run "$WORK/mpi2_ifname.log" "${MPI2[@]}" "${GLOO[@]}" -x GLOO_SOCKET_IFNAME=dmlc0 $CHECK
check_mesh mpi2i "same, gloo, GLOO_SOCKET_IFNAME=dmlc0" 2 "2x2 dp,tp" "tp" "dp=gloo,tp=shm" "$WORK/mpi2_ifname.log"

# An interface the peers cannot reach (loopback, forced by
# GLOO_SOCKET_IFNAME=lo on every rank; Gloo): a rank's error must name the
# address its peer advertised, and the job must end non-zero well before the
# mesh timeout (mpirun stops the others once one rank fails).
run "$WORK/mpi2_lo.log" "${MPI2[@]}" "${GLOO[@]}" -x GLOO_SOCKET_IFNAME=lo $CHECK
named=$(grep -cE '^mesh_check rank=[0-9]+ result=error .*\[127\.0\.0\.1\]:[0-9]+' "$WORK/mpi2_lo.log")
result=pass
if [ "$RC" -eq 0 ] || [ "$named" -lt 1 ]; then
  result="FAIL (exit $RC, $named errors naming 127.0.0.1)"
elif awk -v s="$SECS" -v t="$MESH_TIMEOUT" 'BEGIN { exit !(s >= t) }'; then
  result="FAIL (took ${SECS} s, mesh timeout ${MESH_TIMEOUT} s)"
fi
NOTES+=("GLOO_SOCKET_IFNAME=lo: $(grep -m1 -E '^mesh_check rank=[0-9]+ result=error' "$WORK/mpi2_lo.log")")
add_row "same, gloo, GLOO_SOCKET_IFNAME=lo (unreachable)" 2 "2x2 dp,tp" "-" "-" \
  "exit $RC; $named rank(s) named [127.0.0.1]:port" "$SECS" "$result"
[ "$result" = pass ] || show_log "$WORK/mpi2_lo.log"

# The same by hand, with no launcher to stop the others: every rank must end
# within the 10 s mesh timeout (plus start-up and teardown) with an error
# naming a peer by global rank, and at least one must name the loopback
# address a peer advertised.
run "$WORK/hand_lo.log" "$HERE/by_hand.sh" "$H1" env DEVMESH_CROSS_HOST_BACKEND=gloo \
  GLOO_SOCKET_IFNAME=lo $CHECK --timeout_s=10
errors=$(grep -cE '^mesh_check rank=[0-9]+ result=error .*global rank' "$WORK/hand_lo.log")
named=$(grep -cE '^mesh_check rank=[0-9]+ result=error .*\[127\.0\.0\.1\]:[0-9]+' "$WORK/hand_lo.log")
result=pass
if [ "$RC" -eq 0 ] || [ "$errors" -ne 4 ] || [ "$named" -lt 1 ]; then
  result="FAIL (exit $RC, $errors of 4 errors naming a global rank, $named naming 127.0.0.1)"
elif awk -v s="$SECS" 'BEGIN { exit !(s > 30) }'; then
  result="FAIL (took ${SECS} s, mesh timeout 10 s)"
fi
NOTES+=("by hand, GLOO_SOCKET_IFNAME=lo: $(grep -m1 -E '^mesh_check rank=0 result=error' "$WORK/hand_lo.log")")
add_row "by hand, gloo, GLOO_SOCKET_IFNAME=lo (unreachable)" 2 "2x2 dp,tp" "-" "-" \
  "exit $RC; $errors of 4 ranks failed naming a global rank, $named naming [127.0.0.1]:port" "$SECS" "$result"
[ "$result" = pass ] || show_log "$WORK/hand_lo.log"

# dp the whole job (4x1): 2 members on each host, so dp is two-level (shm
# inside each host, UCX between them; the levels made at its first
# all-reduce), the default since 51c6513.
run "$WORK/two_level.log" "${MPI2[@]}" $CHECK --mesh_shape=4x1
check_mesh two_level "mpirun, dp across both hosts (two-level)" 2 "4x1 dp,tp" "tp" "dp=two_level,tp=shm" "$WORK/two_level.log"
# tp would cross hosts: the host-major ranks named the other way round.
run "$WORK/cross.log" "${MPI2[@]}" $CHECK --mesh_dim_names=tp,dp
check_mesh cross "mpirun, dims named tp,dp" 2 "2x2 tp,dp" "dp" "tp=ucx,dp=shm" "$WORK/cross.log"
# By hand (Open MPI would stop the other ranks as soon as one exits
# non-zero, sometimes while one is still talking to rank 0's store): every
# rank must return the FailedPrecondition, and the job must exit non-zero.
run "$WORK/cross_req.log" "$HERE/by_hand.sh" "$H1" $CHECK --mesh_dim_names=tp,dp --require_inside_host=tp
want_msg="FAILED_PRECONDITION: dim 'tp' must stay inside one host (MeshOptions.require_inside_host) but its line 0,2 crosses hosts 'dmh1' (rank 0) and 'dmh2' (rank 2)"
got=$(grep -cF "result=error $want_msg" "$WORK/cross_req.log")
printed=$(grep -cE '^mesh_check rank=[0-9]+ result=' "$WORK/cross_req.log")
result=pass
if [ "$RC" -eq 0 ] || [ "$got" -ne 4 ] || [ "$printed" -ne 4 ]; then
  result="FAIL (exit $RC, $got of $printed results with the message)"
fi
NOTES+=("require_inside_host=tp: $(grep -m1 -oE 'result=error .*' "$WORK/cross_req.log")")
add_row "by hand, tp,dp, require_inside_host=tp" 2 "2x2 tp,dp" "-" "-" \
  "exit $RC; $got of $printed results: FailedPrecondition naming tp, dmh1, dmh2" "$SECS" "$result"
[ "$result" = pass ] || show_log "$WORK/cross_req.log"

run "$WORK/mpi_kill.log" "${MPI2[@]}" $CHECK --kill_rank=3
check_killed "mpirun --host dmh1:2,dmh2:2" 2 "$WORK/mpi_kill.log"

# By hand, as a new user would: torchrun's variables and nothing else
# (MASTER_ADDR = host 1's veth address; no GLOO_SOCKET_IFNAME).
run "$WORK/hand.log" "$HERE/by_hand.sh" "$H1" $CHECK
check_mesh hand "by hand (torchrun variables)" 2 "2x2 dp,tp" "tp" "dp=ucx,tp=shm" "$WORK/hand.log"

# Shared memory forced across hosts (MeshOptions backend "shm"): the dp
# groups cross, their members cannot map one segment (each host has its own
# /dev/shm), so every rank must fail with FailedPrecondition naming a member
# by global rank, within the 10 s mesh timeout (plus start-up and teardown).
# By hand, so that no launcher stops the others first.
run "$WORK/hand_shm.log" "$HERE/by_hand.sh" "$H1" $CHECK --backend=shm --timeout_s=10
got=$(grep -cE '^mesh_check rank=[0-9]+ result=error FAILED_PRECONDITION: .*global rank [0-9]+' "$WORK/hand_shm.log")
printed=$(grep -cE '^mesh_check rank=[0-9]+ result=' "$WORK/hand_shm.log")
result=pass
if [ "$RC" -eq 0 ] || [ "$got" -ne 4 ] || [ "$printed" -ne 4 ]; then
  result="FAIL (exit $RC, $got of $printed results FailedPrecondition naming a global rank)"
elif awk -v s="$SECS" 'BEGIN { exit !(s > 30) }'; then
  result="FAIL (took ${SECS} s, mesh timeout 10 s)"
fi
NOTES+=("backend=shm across hosts: $(grep -m1 -E '^mesh_check rank=0 result=' "$WORK/hand_shm.log")")
add_row "by hand, --backend=shm" 2 "2x2 dp,tp" "-" "-" \
  "exit $RC; $got of $printed results: FailedPrecondition naming a global rank" "$SECS" "$result"
[ "$result" = pass ] || show_log "$WORK/hand_shm.log"

# One host name, two /dev/shm (views 1 and 1b of hosts.sh: host 1's network
# namespace and name, ranks 2 and 3 with the second /dev/shm, as two
# containers of one host name): both dims are "inside one host" by name, but
# the dp groups (0,2 and 1,3) cannot map one segment, so under the default
# ("auto") the segment check, not the host name, must give them UCX; tp
# (0,1 and 2,3) stays shm.
run "$WORK/hand_2shm.log" env LC_BY_HAND_VIEWS="1 1 1b 1b" "$HERE/by_hand.sh" 127.0.0.1 $CHECK
check_mesh hand_2shm "by hand, one host name, two /dev/shm (ranks 0,1 and 2,3)" 1 \
  "2x2 dp,tp" "dp,tp" "dp=ucx,tp=shm" "$WORK/hand_2shm.log"

# torchrun, one agent per host.
TORCHRUN="$TORCH_VENV/bin/torchrun"
if [ -x "$TORCHRUN" ]; then
  run "$WORK/torchrun.log" "$HERE/torchrun2.sh" static "$TORCHRUN" $CHECK
  EXTRA_FAIL=""
  if [ "$(grep -c 'TORCHELASTIC_USE_AGENT_STORE=True' "$WORK/torchrun.log")" -ne 4 ]; then
    EXTRA_FAIL="not every rank was told to use the agent's store"
  fi
  check_mesh torchrun "torchrun --nnodes=2 (static, agent store)" 2 "2x2 dp,tp" "tp" "dp=ucx,tp=shm" "$WORK/torchrun.log"
  run "$WORK/torchrun_c10d.log" "$HERE/torchrun2.sh" c10d "$TORCHRUN" $CHECK
  check_mesh torchrun_c10d "torchrun --nnodes=2 (c10d rdzv)" 2 "2x2 dp,tp" "tp" "dp=ucx,tp=shm" "$WORK/torchrun_c10d.log"
  run "$WORK/torchrun_kill.log" "$HERE/torchrun2.sh" static "$TORCHRUN" $CHECK --kill_rank=3
  check_killed "torchrun --nnodes=2 (static)" 2 "$WORK/torchrun_kill.log"
elif [ "${DEVMESH_REQUIRE_TORCH:-0}" = 1 ]; then
  add_row "torchrun --nnodes=2" 2 - - - - - "FAIL (no $TORCHRUN; DEVMESH_REQUIRE_TORCH=1)"
else
  add_row "torchrun --nnodes=2" 2 - - - - - "skipped (no $TORCHRUN: run tools/install_torch.sh)"
fi

# ---- The table ------------------------------------------------------------

echo
echo "| launcher | hosts | mesh | dims inside a host | backend per dim | sums right | seconds | result |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${ROWS[@]}"
echo
printf '%s\n' "${NOTES[@]}"
echo
if [ "$FAILURES" -ne 0 ]; then
  echo "launcher_check: $FAILURES of ${#ROWS[@]} checks FAILED"
  exit 1
fi
echo "launcher_check: all ${#ROWS[@]} checks passed"
exit 0
