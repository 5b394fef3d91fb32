#!/usr/bin/env bash
# tools/launcher_check/heal_with_spare.sh JOB_LOG SPARE_LOG -- JOB... -- SPARE...
# The heal rows of tools/launcher_check.sh: starts JOB (a launcher running
# the elastic example with --kill_rank and --heal) with its output in
# JOB_LOG; once a rank there says it SIGKILLs itself, starts SPARE (the dead
# rank again, by hand: the job's store address, its rank's variables and
# DEVMESH_SPARE=1) with its output in SPARE_LOG; waits for both. For
# launchers that cannot restart a failed rank themselves: Open MPI 4.1's
# mpirun accepts --max-restarts but restarts nothing, and srun never
# restarts a task (a second job step runs the spare). Exits with JOB's
# status, or 1 when no rank was killed within 60 s or SPARE failed; prints
# "heal_with_spare: job exit N, spare exit M" last. Each side is bounded by
# the caller's timeout; a spare still running when JOB ends is given 30 s,
# then killed.
set -u
job_log="$1" spare_log="$2"; shift 2
[ "${1:-}" = "--" ] || { echo "usage: $0 JOB_LOG SPARE_LOG -- JOB... -- SPARE..." >&2; exit 2; }
shift
job=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do job+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "$0: no -- before SPARE" >&2; exit 2; }
shift
"${job[@]}" > "$job_log" 2>&1 &
job_pid=$!
spare_pid=""
trap '[ -n "$spare_pid" ] && kill "$spare_pid" 2>/dev/null; [ -n "$job_pid" ] && kill "$job_pid" 2>/dev/null' EXIT
trap 'exit 143' TERM INT
for _ in $(seq 600); do
  grep -q "SIGKILL at step" "$job_log" && break
  kill -0 "$job_pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "SIGKILL at step" "$job_log"; then
  echo "heal_with_spare: the job printed no \"SIGKILL at step\" (it ended first, or 60 s passed)" >&2
  wait "$job_pid"
  job_rc=$?
  job_pid=""
  echo "heal_with_spare: job exit $job_rc, spare not started"
  exit 1
fi
"$@" > "$spare_log" 2>&1 &
spare_pid=$!
wait "$job_pid"
job_rc=$?
job_pid=""
for _ in $(seq 300); do kill -0 "$spare_pid" 2>/dev/null || break; sleep 0.1; done
kill "$spare_pid" 2>/dev/null
wait "$spare_pid"
spare_rc=$?
spare_pid=""
echo "heal_with_spare: job exit $job_rc, spare exit $spare_rc"
[ "$spare_rc" -eq 0 ] || exit 1
exit "$job_rc"
