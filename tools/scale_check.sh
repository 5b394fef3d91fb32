#!/usr/bin/env bash
# tools/scale_check.sh: group creation at scale (issue 19), end to end. Starts
# //bench:startup (InitDeviceMesh, GetGroup on every dim, one checked
# all-reduce per dim) on N ranks and prints, per run, launch to usable (the
# last rank), "+mesh" (from there to the last rank past a Barrier per dim,
# the first collective off the small all-reduce route, which connects the
# pairs a Gloo group across hosts left for first use), and the maximum per
# rank of the store round trips and payload
# bytes that group creation cost, communicators, sockets held when ready
# (the store host's clients left out) and peak RSS, then the requests the
# store served (tools/scale_check/summarize.py).
#
#   tools/scale_check.sh [--mesh=16x16] [--runs=3]
#       one host: N = the mesh's size, started by //bench:startup's own
#       launcher (rank 0 hosts the store).
#   sudo tools/scale_check.sh --hosts=8 --mesh=32x32 [--runs=1]
#       H network-namespace "hosts" on this machine (each its own address,
#       host name and port space, joined by a bridge in a namespace of its
#       own), N/H consecutive ranks on each, so a mesh's inner dim of at most
#       N/H ranks stays inside a host; the store is //store:server on host 1
#       (DEVMESH_STORE_ADDR: no rank hosts it). Namespaces, bridge and every
#       process are removed by a trap, also on failure or interrupt.
#   sudo tools/scale_check.sh --hosts=8 --mesh=32x32 --store=both [--runs=1]
#       the same, with each run made twice, the TCP store's round then the
#       etcd store's ("run R tcp", "run R etcd", side by side): the etcd
#       round's store is an etcd cluster of --etcd_members=1|3 members, each
#       on a namespace host of its own after the ranks' (dmsc-h<H+1>...),
#       started once for the invocation (a fresh data dir under /tmp), each
#       round's job under a key prefix of its own
#       (DEVMESH_STORE_ADDR=etcd://<members>/scale-<run>/). --store=etcd
#       runs only the etcd rounds. The "store:" line under each row counts
#       the requests the store served in that round (//store:server's own
#       count; etcd's grpc_server_started_total over its members, from
#       /metrics: every gateway request and watch) and per rank; an etcd
#       row's "http/rank" is the most HTTP requests one rank's EtcdStore
#       sent up to ready (bench:startup's etcd_requests: the bootstrap's
#       join, InitDeviceMesh, the groups and the failure watch).
#       --etcd_nice=N starts the etcd members under `nice -n N` (-20..19;
#       default none): a model of members on hosts of their own, which
#       production etcd has, on a machine whose cores the ranks share. Keep
#       it an extra row beside a round without it: it hides any client-side
#       load on the store.
#
# Flags: --backend=auto|gloo|shm every dim's backend (default auto, what
# InitDeviceMesh("cpu") gives: shared memory inside a host, 3 store round
# trips and no socket per group; UCX across hosts, 2 round trips per group,
# its sockets UCX's listening ones and the endpoints of the first
# collective. With DEVMESH_CROSS_HOST_BACKEND=gloo in the environment (or
# --backend=gloo; then the ranks are //bench:startup_gloo, which links
# //comm:gloo, where //bench:startup links what a program that names no
# opt-in backend links), Gloo across hosts: 4
# round trips and size - 1 sockets per group, and for a power-of-two size
# log2(size) more sockets (made in the same round trips) for its synchronous
# all-reduce route, comm/gloo/gloo_sync_allreduce.h;
# DEVMESH_GLOO_SYNC_ROUTE=0 leaves it out), plus the group that checks each
# Gloo group's calls (verified by default: shared memory inside a host, UCX
# across).
# --expect_round_trips=T fails a run in which some
# rank's group creation made other than T store round trips;
# --max_sockets=S fails a run in which a rank held more than S sockets
# (bound: the sum over its groups of size - 1, plus log2(size) for each
# Gloo group with the synchronous route, plus its two store connections:
# its own and its failure watch's, device_mesh/failure_watch.h, and the
# watch's liveness beacon, one listening socket, liveness_beacon.h).
# Binaries are built with -c opt, as `bazel run` builds them for users
# (-c=fastbuild for a debug build). --keep_logs=DIR copies every rank's and
# the store's output there at the end. Every launch is bounded by --timeout_s
# (default 300). Exit status: 0 when
# every run passed its checks, 1 otherwise, 2 on bad flags.
set -uo pipefail
cd "$(dirname "$0")/.."
MESH=16x16 HOSTS=1 RUNS=3 TIMEOUT_S=300 EXPECT_TRIPS="" MAX_SOCKETS="" MODE=opt KEEP_LOGS="" BACKEND=auto
STORE=tcp ETCD_MEMBERS=1 ETCD_NICE=""
for arg in "$@"; do
  case "$arg" in
    --mesh=*) MESH="${arg#*=}" ;;
    --hosts=*) HOSTS="${arg#*=}" ;;
    --runs=*) RUNS="${arg#*=}" ;;
    --timeout_s=*) TIMEOUT_S="${arg#*=}" ;;
    --expect_round_trips=*) EXPECT_TRIPS="${arg#*=}" ;;
    --backend=*) BACKEND="${arg#*=}" ;;
    --max_sockets=*) MAX_SOCKETS="${arg#*=}" ;;
    --keep_logs=*) KEEP_LOGS="${arg#*=}" ;;
    --store=*) STORE="${arg#*=}" ;;
    --etcd_members=*) ETCD_MEMBERS="${arg#*=}" ;;
    --etcd_nice=*) ETCD_NICE="${arg#*=}" ;;
    -c=*|--compilation_mode=*) MODE="${arg#*=}" ;;
    *) echo "scale_check: unknown flag $arg" >&2; exit 2 ;;
  esac
done
NPROC=1
IFS=x read -r -a DIMS <<< "$MESH"
for d in "${DIMS[@]}"; do
  [[ "$d" =~ ^[1-9][0-9]*$ ]] || { echo "scale_check: bad --mesh=$MESH" >&2; exit 2; }
  NPROC=$((NPROC * d))
done
[[ "$HOSTS" =~ ^[1-9][0-9]*$ && "$RUNS" =~ ^[1-9][0-9]*$ ]] ||
  { echo "scale_check: --hosts and --runs must be positive integers" >&2; exit 2; }
if [ $((NPROC % HOSTS)) -ne 0 ] || [ "$HOSTS" -gt 200 ]; then
  echo "scale_check: $NPROC ranks do not split over $HOSTS hosts (at most 200)" >&2; exit 2
fi
case "$STORE" in
  tcp) STORES=(tcp) ;;
  etcd) STORES=(etcd) ;;
  both) STORES=(tcp etcd) ;;
  *) echo "scale_check: --store must be tcp, etcd or both" >&2; exit 2 ;;
esac
[[ "$ETCD_MEMBERS" == 1 || "$ETCD_MEMBERS" == 3 ]] ||
  { echo "scale_check: --etcd_members must be 1 or 3" >&2; exit 2; }
[[ -z "$ETCD_NICE" || "$ETCD_NICE" =~ ^-?[0-9]+$ ]] ||
  { echo "scale_check: --etcd_nice must be an integer (-20..19)" >&2; exit 2; }
if [ "$STORE" != tcp ] && [ "$HOSTS" -lt 2 ]; then
  echo "scale_check: --store=$STORE needs --hosts >= 2 (etcd runs on namespace hosts)" >&2; exit 2
fi
# Namespace hosts: the ranks' (1..HOSTS), then etcd's members' when used.
ALL_HOSTS=$HOSTS
[ "$STORE" != tcp ] && ALL_HOSTS=$((HOSTS + ETCD_MEMBERS))
PER_HOST=$((NPROC / HOSTS))
CHECKS=(--expect_ranks "$NPROC")
[ -n "$EXPECT_TRIPS" ] && CHECKS+=(--expect_round_trips "$EXPECT_TRIPS")
[ -n "$MAX_SOCKETS" ] && CHECKS+=(--max_sockets "$MAX_SOCKETS")

WORK="$(mktemp -d /tmp/scale_check.XXXXXX)"
NS_PREFIX="dmsc-h" SWITCH_NS="dmsc-sw" NET="10.231.9" BRIDGE="dmscbr0"
# One run at a time on the dmsc-* namespaces (tools/ns_lock.sh).
source tools/ns_lock.sh
hosts_down() {
  local n ns pids
  ns_lock_held || return 0
  for n in $(seq "$ALL_HOSTS") sw; do
    ns="$NS_PREFIX$n"; [ "$n" = sw ] && ns="$SWITCH_NS"
    pids=$(ip netns pids "$ns" 2>/dev/null) || continue
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
}
cleanup() {
  [ "$HOSTS" -gt 1 ] && hosts_down
  if [ -n "$KEEP_LOGS" ]; then
    mkdir -p "$KEEP_LOGS" && cp "$WORK"/*.log "$KEEP_LOGS"/ 2>/dev/null
  fi
  rm -rf "$WORK"
  [ -n "$ETCD_DATA" ] && rm -rf "$ETCD_DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The hosts: namespace N has eth0 = $NET.N on the bridge of $SWITCH_NS.
hosts_up() {
  ns_lock /run/devmesh-scale-check.lock "${SCALE_CHECK_LOCK_WAIT_S:-3600}" || return 1
  hosts_down
  local n ns hosts_file="$WORK/hosts"
  printf '127.0.0.1 localhost\n' > "$hosts_file"
  for n in $(seq "$ALL_HOSTS"); do printf '%s.%d dmsc%d\n' "$NET" "$n" "$n" >> "$hosts_file"; done
  ip netns add "$SWITCH_NS" || return 1
  ip -n "$SWITCH_NS" link add "$BRIDGE" type bridge || return 1
  ip -n "$SWITCH_NS" link set "$BRIDGE" up
  for n in $(seq "$ALL_HOSTS"); do
    ns="$NS_PREFIX$n"
    ip netns add "$ns" || return 1
    mkdir -p "/etc/netns/$ns" && cp "$hosts_file" "/etc/netns/$ns/hosts"
    ip -n "$SWITCH_NS" link add "p$n" type veth peer name eth0 netns "$ns" || return 1
    ip -n "$SWITCH_NS" link set "p$n" master "$BRIDGE" up
    ip -n "$ns" addr add "$NET.$n/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}
# on_host N CMD...: CMD in host N's network namespace, host name dmscN.
on_host() {
  local n="$1"; shift
  ip netns exec "$NS_PREFIX$n" unshare --uts sh -c 'hostname "$0" && exec "$@"' "dmsc$n" "$@"
}

# etcd: members on hosts HOSTS+1.., started once; ETCD_ENDPOINTS "a:2379,...".
# Their data dirs are on tmpfs (/dev/shm), as on the dedicated low-latency
# disk etcd's hardware guides ask for: on this machine's disk, shared with
# builds, a 1024-rank round logged WAL fsyncs of 1.5-4 s and crawled.
# --logger=zap: with 3.4's default logger (capnslog) a linearizable read
# whose ReadIndex times out logs through a nil zap logger and etcd panics
# (etcd-io/etcd#17265, fixed in 3.4.30; Debian ships 3.4.23): a 1024-rank
# round killed the member that way at 17:49 on 2026-12-05.
ETCD_PIDS=() ETCD_ENDPOINTS="" ETCD_DATA=""
etcd_up() {
  local m n cluster="" i
  ETCD_DATA="$(mktemp -d /dev/shm/scale_check_etcd.XXXXXX)" || return 1
  for m in $(seq "$ETCD_MEMBERS"); do
    n=$((HOSTS + m))
    cluster+="${cluster:+,}m$m=http://$NET.$n:2380"
    ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}$NET.$n:2379"
  done
  for m in $(seq "$ETCD_MEMBERS"); do
    n=$((HOSTS + m))
    on_host "$n" ${ETCD_NICE:+nice -n "$ETCD_NICE"} etcd --name "m$m" \
      --data-dir "$ETCD_DATA/etcd$m" --logger=zap \
      --listen-client-urls "http://$NET.$n:2379" \
      --advertise-client-urls "http://$NET.$n:2379" \
      --listen-peer-urls "http://$NET.$n:2380" \
      --initial-advertise-peer-urls "http://$NET.$n:2380" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      >"$WORK/etcd$m.log" 2>&1 &
    ETCD_PIDS+=($!)
  done
  for i in $(seq 100); do
    on_host $((HOSTS + 1)) timeout 2 etcdctl --endpoints="$ETCD_ENDPOINTS" \
      endpoint health >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}
# etcd_served: the RPCs etcd's members have started so far (gateway
# requests and watches: grpc_server_started_total, summed over members).
etcd_served() {
  local m n total=0 v
  for m in $(seq "$ETCD_MEMBERS"); do
    n=$((HOSTS + m))
    v=$(on_host "$n" timeout 5 curl -s "http://$NET.$n:2379/metrics" |
        awk '/^grpc_server_started_total/ {s += $NF} END {printf "%d", s}')
    total=$((total + ${v:-0}))
  done
  echo "$total"
}

STARTUP=startup
[ "$BACKEND" = gloo ] || [ "${DEVMESH_CROSS_HOST_BACKEND:-}" = gloo ] && STARTUP=startup_gloo
echo "scale_check: building //bench:$STARTUP //store:server (-c $MODE)"
timeout 1200 bazel build -c "$MODE" "//bench:$STARTUP" //store:server >"$WORK/build.log" 2>&1 ||
  { tail -20 "$WORK/build.log" >&2; echo "scale_check: build failed" >&2; exit 1; }
mkdir -p "$WORK/bin"
# The output tree of -c $MODE, not the bazel-bin link, which another build
# in this workspace (another configuration) may have moved meanwhile.
BIN_DIR=$(bazel info -c "$MODE" bazel-bin 2>/dev/null) ||
  { echo "scale_check: bazel info bazel-bin failed" >&2; exit 1; }
# Copied as bin/startup whichever was built (the kill below names it).
cp "$BIN_DIR/bench/$STARTUP" "$WORK/bin/startup" && cp "$BIN_DIR/store/server" "$WORK/bin/" ||
  { echo "scale_check: the built binaries are not in $BIN_DIR" >&2; exit 1; }
if [ "$HOSTS" -gt 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "scale_check: --hosts > 1 needs root (network namespaces)" >&2; exit 2; }
  hosts_up || { echo "scale_check: could not make the namespace hosts" >&2; exit 1; }
fi
if [ "$STORE" != tcp ]; then
  command -v etcd >/dev/null || { echo "scale_check: no etcd (bash tools/install.sh installs it)" >&2; exit 1; }
  etcd_up || { tail -5 "$WORK"/etcd*.log >&2; echo "scale_check: etcd did not start within 20 s" >&2; exit 1; }
  echo "scale_check: etcd, $ETCD_MEMBERS member(s) at $ETCD_ENDPOINTS${ETCD_NICE:+ (nice $ETCD_NICE)}"
fi
echo "scale_check: mesh $MESH, $NPROC ranks over $HOSTS host(s), $RUNS run(s), store ${STORES[*]}"
printf '%-14s %6s %5s %10s %10s %10s %10s %8s %12s %12s %8s %8s %9s %9s\n' run ranks \
  hosts "started s" "joined s" "groups s" "usable s" "+mesh s" trips/rank \
  bytes/rank comms sockets "rss MiB" "http/rank"
FAILED=0
for run in $(seq "$RUNS"); do
 for store in "${STORES[@]}"; do
  LOGS=()
  served=""
  if [ "$HOSTS" -eq 1 ]; then
    timeout "$TIMEOUT_S" "$WORK/bin/startup" --mesh_shape="$MESH" --backend="$BACKEND" >"$WORK/run$run.log" 2>&1
    rc=$?
    LOGS=("$WORK/run$run.log")
    STORE_RANK=0
  else
    port=$((29600 + run))
    if [ "$store" = tcp ]; then
      on_host 1 "$WORK/bin/server" --port="$port" --bind="$NET.1" >"$WORK/server$run.log" 2>&1 &
      server_pid=$!
      for i in $(seq 50); do grep -q listening "$WORK/server$run.log" 2>/dev/null && break; sleep 0.1; done
      addr="$NET.1:$port"
    else
      etcd_before=$(etcd_served)
      addr="etcd://$ETCD_ENDPOINTS/scale-$run-$$/"
    fi
    t0=$(date +%s%N)
    # MASTER_ADDR/PORT: the rendezvous variables a launcher sets; the store
    # is DEVMESH_STORE_ADDR's.
    export WORLD_SIZE="$NPROC" LOCAL_WORLD_SIZE="$PER_HOST" \
      MASTER_ADDR="$NET.1" MASTER_PORT="$port" \
      DEVMESH_STORE_ADDR="$addr" PEER_BENCH_T0_NS="$t0"
    pids=()
    for n in $(seq "$HOSTS"); do
      # One shell per host starts its ranks (not one namespace entry each).
      # A rank that ends other than with status 0 is named with its status
      # (128 + N: killed by signal N), so that one that dies without a word
      # (SIGPIPE, SIGSEGV) is seen; 137 (SIGKILL) is left out: this script
      # kills the ranks of a launch past --timeout_s that way.
      on_host "$n" bash -c '
        for i in $(seq 0 $(($3 - 1))); do
          (RANK=$(($2 * $3 + i)) LOCAL_RANK=$i "$1" --mesh_shape="$4" --backend="$5"
           rc=$?; [ "$rc" -ne 0 ] && [ "$rc" -ne 137 ] && echo "scale_check: rank $(($2 * $3 + i)) ended with status $rc" >&2) &
        done
        wait' startup "$WORK/bin/startup" "$((n - 1))" "$PER_HOST" "$MESH" "$BACKEND" \
        >"$WORK/run$run.$store.h$n.log" 2>&1 &
      pids+=($!)
      LOGS+=("$WORK/run$run.$store.h$n.log")
    done
    rc=0
    deadline=$(( $(date +%s) + TIMEOUT_S ))
    for p in "${pids[@]}"; do
      while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
      # Past the deadline: the ranks are killed before the wait (which
      # would otherwise wait for them past --timeout_s).
      if kill -0 "$p" 2>/dev/null; then rc=124; pkill -9 -f "$WORK/bin/startup" 2>/dev/null; fi
      wait "$p" 2>/dev/null || { r=$?; [ "$rc" -eq 0 ] && rc=$r; }
    done
    if [ "$store" = tcp ]; then
      # $! is the shell of on_host (a function); the server is its child.
      pkill -TERM -f "$WORK/bin/server" 2>/dev/null; wait "$server_pid" 2>/dev/null
      served=$(grep -o "after serving [0-9]* requests" "$WORK/server$run.log" | head -1)
      n_served=$(echo "$served" | grep -o "[0-9][0-9]*")
      [ -z "$served" ] && served="(no count: $(tail -2 "$WORK/server$run.log" | tr "\n" " "))"
    else
      n_served=$(( $(etcd_served) - etcd_before ))
      # Per gRPC method (cumulative since etcd started), kept with the logs.
      for m in $(seq "$ETCD_MEMBERS"); do
        on_host $((HOSTS + m)) timeout 5 curl -s "http://$NET.$((HOSTS + m)):2379/metrics" |
          grep '^grpc_server_started_total' >"$WORK/etcd$m.run$run.methods.log"
      done
      served="etcd started $n_served RPCs (grpc_server_started_total)"
    fi
    [ -n "$n_served" ] && served+=", $((n_served / NPROC)) per rank"
    STORE_RANK=-1
  fi
  label="run $run"
  [ "$HOSTS" -gt 1 ] && label="run $run $store"
  python3 tools/scale_check/summarize.py --label "$label" --hosts "$HOSTS" \
    --store_rank "$STORE_RANK" "${CHECKS[@]}" "${LOGS[@]}"
  src=$?
  [ -n "$served" ] && echo "               store: $served"
  if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ]; then
    echo "scale_check: run $run ($store) failed (launch exit $rc); last lines:" >&2
    cat "${LOGS[@]}" | grep -v PEER_BENCH_STARTUP | tail -5 >&2
    FAILED=1
  fi
 done
done
exit "$FAILED"
