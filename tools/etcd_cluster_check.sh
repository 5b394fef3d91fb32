#!/usr/bin/env bash
# tools/etcd_cluster_check.sh: a job whose store is a 3-member etcd cluster
# (DEVMESH_STORE_ADDR=etcd://...), on three "hosts" made of network
# namespaces (dmec-h1..3 at 10.232.8.1..3, each with its own host name and
# /dev/shm, joined by a bridge in a fourth namespace, dmec-sw; nothing is
# routed outside them). Each host runs one etcd member; the worked elastic
# example (examples/elastic, a (dp=3, tp=2) mesh) runs 4 ranks on host 1 and
# 2 on host 2, and during training:
#   leader_killed   the etcd leader is SIGKILLed: the job goes on, every rank
#                   ends with parameters equal to a fresh run's, no Shrink
#   member_stopped  the etcd member of host 1 (every rank's first endpoint)
#                   is SIGSTOPped for 4 s (twice the failure watch's 2 s lease
#                   silence), then continued: no verdict, no Shrink, exact
#   host_killed     every process of host 2 (ranks 4 and 5, its etcd member)
#                   is SIGKILLed: ranks 0-3 shrink to 2 replicas and finish
#                   with exact parameters
# Each scenario starts a fresh cluster and job. Prints one table and a count
# line; exits non-zero when any run fails. Namespaces, members, ranks and the
# work dir are removed by a trap, also on failure or interrupt; every step is
# bounded by `timeout`.
#
#   sudo tools/etcd_cluster_check.sh [--runs=N] [--no_build]   (root)
#
# Needs: etcd-server, etcd-client, iproute2, util-linux (tools/install.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

RUNS=1
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --runs=*) RUNS="${arg#--runs=}" ;;
    --no_build) BUILD=0 ;;  # use the elastic example already built (-c opt)
    *) echo "usage: $0 [--runs=N] [--no_build]" >&2; exit 2 ;;
  esac
done

NET="10.232.8"          # host N at $NET.N
NS="dmec-h"             # network namespaces dmec-h1..3
SW="dmec-sw"            # the bridge's namespace
HOSTS="1 2 3"
STEPS=16000             # long enough to be hit mid-run: 4000 ended in 5 s in
                        # an idle CI run (2026-12-05), inside the 5 s fault
JOB_TIMEOUT=120         # seconds, one job
STOP_FOR=4              # seconds a member stays stopped (lease silence: 2)
WORK="$(mktemp -d /tmp/etcd_cluster_check.XXXXXX)"
BIN="$WORK/bin"
ROWS=()
FAILURES=0
LAUNCHES=0
SLOWEST=0

# ---- Hosts ------------------------------------------------------------------

holder_pid() { cat "$WORK/holder$1.pid" 2>/dev/null; }

# host_cmd N: HC becomes the command prefix that runs on host N (its
# /dev/shm, its network, its host name); every step execs the next, so the
# pid of "${HC[@]}" CMD & is CMD's.
host_cmd() {
  HC=(nsenter --mount="/proc/$(holder_pid "$1")/ns/mnt" --wd="$WORK"
      ip netns exec "$NS$1" unshare --uts sh -c 'hostname "$0" && exec "$@"'
      "dmec$1")
}

# kill_host N: every process in host N's network namespace (TERM, 2 s, KILL).
kill_host() {
  local pids i
  pids=$(ip netns pids "$NS$1" 2>/dev/null) || return 0
  [ -z "$pids" ] && return 0
  kill $pids 2>/dev/null
  for i in $(seq 20); do
    pids=$(ip netns pids "$NS$1" 2>/dev/null)
    [ -z "$pids" ] && return 0
    sleep 0.1
  done
  kill -9 $pids 2>/dev/null || true
}

# One run at a time on the dmec-* namespaces (tools/ns_lock.sh).
source tools/ns_lock.sh
hosts_down() {
  local n pid
  ns_lock_held || return 0
  for n in $HOSTS; do kill_host "$n"; done
  for n in $HOSTS; do
    pid=$(holder_pid "$n")
    # Only our holder: a sleep in a mount namespace other than ours.
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ] &&
      [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]; then
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$WORK/holder$n.pid"
  done
  for n in $HOSTS; do ip netns del "$NS$n" 2>/dev/null || true; done
  ip netns del "$SW" 2>/dev/null || true
}

hosts_up() {
  local n i pid
  ip netns add "$SW"
  ip -n "$SW" link add dmecbr type bridge
  ip -n "$SW" link set dmecbr up
  for n in $HOSTS; do
    ip netns add "$NS$n"
    ip link add "dmecv$n" type veth peer name "dmecp$n"
    ip link set "dmecv$n" netns "$NS$n"
    ip link set "dmecp$n" netns "$SW"
    ip -n "$SW" link set "dmecp$n" master dmecbr
    ip -n "$SW" link set "dmecp$n" up
    ip -n "$NS$n" link set "dmecv$n" name dmec0
    ip -n "$NS$n" addr add "$NET.$n/24" dev dmec0
    ip -n "$NS$n" link set dmec0 up
    ip -n "$NS$n" link set lo up
    # Its own /dev/shm: a mount namespace held by a sleep.
    unshare --mount --propagation private -- sh -c \
      'mount -t tmpfs -o mode=1777,nosuid,nodev "dmec-shm-$0" /dev/shm && exec sleep infinity' \
      "$n" </dev/null >/dev/null 2>&1 &
    pid=$!
    disown "$pid"  # no job notice when hosts_down ends it
    echo "$pid" > "$WORK/holder$n.pid"
    for i in $(seq 50); do
      [ "$(nsenter --mount="/proc/$pid/ns/mnt" findmnt -n -o SOURCE /dev/shm 2>/dev/null | tail -n 1)" = "dmec-shm-$n" ] && break
      sleep 0.1
    done
  done
}

cleanup() {
  hosts_down
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- etcd -------------------------------------------------------------------

ENDPOINTS="$NET.1:2379,$NET.2:2379,$NET.3:2379"
CLUSTER="m1=http://$NET.1:2380,m2=http://$NET.2:2380,m3=http://$NET.3:2380"

# etcd_up: a fresh member on every host; waits (20 s at most) for a leader.
etcd_up() {
  local n i
  for n in $HOSTS; do
    rm -rf "$WORK/etcd$n"
    host_cmd "$n"
    # --logger=zap: 3.4's default logger panics through a nil zap logger
    # when a linearizable read times out (etcd-io/etcd#17265, fixed in
    # 3.4.30; Debian ships 3.4.23; seen in tools/scale_check.sh).
    "${HC[@]}" etcd --name "m$n" --data-dir "$WORK/etcd$n" --logger=zap \
      --listen-client-urls "http://$NET.$n:2379" \
      --advertise-client-urls "http://$NET.$n:2379" \
      --listen-peer-urls "http://$NET.$n:2380" \
      --initial-advertise-peer-urls "http://$NET.$n:2380" \
      --initial-cluster "$CLUSTER" --initial-cluster-state new \
      > "$WORK/etcd$n.log" 2>&1 &
    echo $! > "$WORK/etcd$n.pid"
    disown $!  # no job notice when it is killed
  done
  for i in $(seq 100); do
    [ -n "$(leader)" ] && return 0
    sleep 0.2
  done
  echo "etcd_cluster_check: no etcd leader within 20 s" >&2
  return 1
}

etcd_down() {
  local n pid
  for n in $HOSTS; do
    pid=$(cat "$WORK/etcd$n.pid" 2>/dev/null)
    if [ -n "$pid" ]; then
      kill -CONT "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$WORK/etcd$n.pid"
  done
  for n in $HOSTS; do kill_host "$n"; done
}

# leader: the host number of the etcd leader, or "" (asked from host 3's
# namespace, each member for itself, 2 s at most).
leader() {
  host_cmd 3
  "${HC[@]}" timeout 2 etcdctl --endpoints="$ENDPOINTS" \
    --command-timeout=1s endpoint status -w simple 2>/dev/null |
    awk -F', ' -v net="$NET." '$5 == "true" { sub(net, "", $1); sub(":2379", "", $1); print $1; exit }'
}

# ---- The job ----------------------------------------------------------------

# Ranks 0-3 on host 1, 4-5 on host 2: rank R's host and local rank.
rank_host() { if [ "$1" -lt 4 ]; then echo 1; else echo 2; fi; }

RANK_PIDS=()
# start_job PREFIX: the 6 ranks, in the background, logs in $WORK/rank<R>.log.
start_job() {
  local prefix="$1" r host local_rank local_size
  RANK_PIDS=()
  for r in 0 1 2 3 4 5; do
    host=$(rank_host "$r")
    if [ "$host" = 1 ]; then local_rank=$r; local_size=4
    else local_rank=$((r - 4)); local_size=2; fi
    host_cmd "$host"
    timeout --kill-after=5 "$JOB_TIMEOUT" \
      env RANK="$r" WORLD_SIZE=6 LOCAL_RANK="$local_rank" \
      LOCAL_WORLD_SIZE="$local_size" \
      DEVMESH_STORE_ADDR="etcd://$ENDPOINTS/$prefix/" \
      "${HC[@]}" "$BIN/elastic_training_main" --tp=2 --steps="$STEPS" \
      > "$WORK/rank$r.log" 2>&1 &
    RANK_PIDS+=($!)
  done
}

# wait_job: every rank's exit code into RC_OF[R].
RC_OF=()
wait_job() {
  local r
  for r in 0 1 2 3 4 5; do
    wait "${RANK_PIDS[$r]}"
    RC_OF[$r]=$?
  done
}

# check_rank R WANT_EPOCH WANT_REPLICAS: "" when rank R exited 0 with
# parameters equal to a fresh run's at that epoch, else why not.
check_rank() {
  local r="$1" epoch="$2" replicas="$3" log="$WORK/rank$1.log"
  if [ "${RC_OF[$r]}" -ne 0 ]; then echo "rank $r exit ${RC_OF[$r]}"; return; fi
  if ! grep -q "rank $r: trained $STEPS steps, epoch $epoch[;,].*equal a fresh run's" "$log"; then
    echo "rank $r: $(grep -m1 "rank $r:" "$log" | cut -c1-160)"; return
  fi
  if [ "$replicas" -gt 0 ] &&
    ! grep -q "rank $r: trained .*with $replicas replicas" "$log"; then
    echo "rank $r did not resume with $replicas replicas"
  fi
}

# alive: how many of the job's rank processes still run.
alive() {
  local pid n=0
  for pid in "${RANK_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done
  echo "$n"
}

# started PREFIX: waits (20 s at most) until every rank's failure watch has
# renewed its lease in etcd (devmesh/job/lease/<rank>, under the job's key
# prefix): every rank has its mesh and is training.
started() {
  local i n
  host_cmd 3
  for i in $(seq 100); do
    n=$("${HC[@]}" timeout 2 etcdctl --endpoints="$ENDPOINTS" \
      --command-timeout=1s get --prefix "/$1/devmesh/job/lease/" --keys-only \
      2>/dev/null | grep -c lease)
    [ "${n:-0}" -ge 6 ] && return 0
    sleep 0.2
  done
  return 1
}

add_row() {  # scenario run seconds result
  ROWS+=("$(printf '| %s | %s | %s | %s |' "$@")")
  LAUNCHES=$((LAUNCHES + 1))
  case "$4" in pass*) ;; *) FAILURES=$((FAILURES + 1)) ;; esac
  SLOWEST=$(awk -v a="$SLOWEST" -v b="$3" 'BEGIN { print (b > a ? b : a) }')
}

now() { date +%s.%N; }

run_scenario() {
  local name="$1" run="$2" t0 secs why="" r victim pid
  etcd_up || { add_row "$name" "$run" 0 "FAIL (etcd did not start)"; etcd_down; return; }
  t0=$(now)
  start_job "$name-$run-$$"
  started "$name-$run-$$" || why="not every rank had a lease in etcd within 20 s"
  sleep 1
  if [ -z "$why" ]; then
    case "$name" in
      leader_killed)
        victim=$(leader)
        if [ -z "$victim" ]; then why="no leader to kill"
        else kill -9 "$(cat "$WORK/etcd$victim.pid")"; sleep 1; fi
        ;;
      member_stopped)
        pid=$(cat "$WORK/etcd1.pid")
        kill -STOP "$pid"; sleep "$STOP_FOR"; kill -CONT "$pid"
        ;;
      host_killed)
        kill_host 2
        ;;
    esac
    # Training was still going on when the fault ended.
    if [ "$name" != host_killed ] && [ "$(alive)" -ne 6 ]; then
      why="only $(alive) ranks were running when the fault ended (raise STEPS)"
    fi
  fi
  wait_job
  secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  if [ -z "$why" ]; then
    if [ "$name" = host_killed ]; then
      for r in 0 1 2 3; do why="$why$(check_rank "$r" 1 2)"; done
    else
      for r in 0 1 2 3 4 5; do why="$why$(check_rank "$r" 0 0)"; done
    fi
  fi
  if [ -z "$why" ]; then add_row "$name" "$run" "$secs" pass
  else
    add_row "$name" "$run" "$secs" "FAIL ($why)"
    for r in 0 1 2 3 4 5; do echo "---- rank $r"; tail -n 5 "$WORK/rank$r.log"; done
  fi
  etcd_down
  kill_host 1; kill_host 2; kill_host 3
}

# ---- Main -------------------------------------------------------------------

main() {
  if [ "$(id -u)" -ne 0 ]; then echo "$0: needs root (sudo)" >&2; exit 1; fi
  if [ "$BUILD" = 1 ]; then
    timeout 1200 bazel build -c opt //examples/elastic:elastic_training_main \
      > "$WORK/build.log" 2>&1 || { tail -n 20 "$WORK/build.log"; exit 1; }
  fi
  mkdir -p "$BIN"
  cp bazel-out/k8-opt/bin/examples/elastic/elastic_training_main "$BIN/"
  ns_lock /run/devmesh-etcd-cluster-check.lock "${ETCD_CHECK_LOCK_WAIT_S:-3600}" || exit 1
  hosts_down
  hosts_up || exit 1
  local run name
  for run in $(seq "$RUNS"); do
    for name in leader_killed member_stopped host_killed; do
      run_scenario "$name" "$run"
    done
  done
  echo
  echo "| scenario | run | seconds | result |"
  echo "|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "etcd_cluster_check: $LAUNCHES launches, $FAILURES failures, slowest ${SLOWEST}s"
  [ "$FAILURES" -eq 0 ]
}
main
