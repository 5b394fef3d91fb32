# tools/launcher_check/hosts.sh: two "hosts" on one machine, sourced by
# tools/launcher_check.sh. Each host is a network namespace (iproute2) with
# its own veth address, entered through a fresh UTS namespace that carries
# its host name. The two are joined by one veth pair; nothing is routed
# outside them. Its /etc/hosts (ip netns exec bind-mounts /etc/netns/NS/hosts)
# is Debian's default shape: the host's own name on 127.0.1.1, the other
# host's name on its veth address, so that "what my host name resolves to"
# is loopback, the trap that GLOO_SOCKET_IFNAME used to be needed for.
#
# Each host also has its own /dev/shm, as real hosts have (without it, the
# two "hosts" would share the machine's /dev/shm and the shared-memory
# backend could join them): a mount namespace per host, private propagation,
# with a fresh tmpfs on /dev/shm, held open by one `sleep` (the "holder")
# whose /proc/PID/ns/mnt on_host.sh enters before `ip netns exec` (which
# makes its own child mount namespace from that one, keeping the tmpfs).
# Every process on host N sees the same /dev/shm, another than host M's and
# the machine's. A third one, view "1b", is a second /dev/shm on host 1
# (same network namespace, same host name): ranks in views 1 and 1b share a
# host name but not memory, as two containers can. Holders' pids are in
# $LC_SHM_DIR; lc_hosts_down ends them (their namespaces and tmpfs go with
# them) before it deletes the network namespaces.
#
# One user at a time: lc_hosts_up takes an exclusive lock on $LC_LOCK
# (tools/ns_lock.sh, waiting up to $LC_LOCK_WAIT_S s), so that tools/launcher_check.sh and
# tools/cross_host_bench.sh run one after the other, never in the same
# namespaces at once (a second run's ranks would join the first's store).
# lc_hosts_down does nothing in a shell that does not hold the lock, so a
# run that gave up waiting leaves the holder's hosts alone.
#
# Needs: root, ip (iproute2), unshare and nsenter (util-linux), flock.

LC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$LC_DIR/../ns_lock.sh"
LC_NET_PREFIX="10.231.7"     # host N gets ${LC_NET_PREFIX}.N
LC_NS_PREFIX="dmlc-h"        # network namespaces dmlc-h1, dmlc-h2
LC_HOST_PREFIX="dmh"         # host names dmh1, dmh2
LC_VETH_PREFIX="dmlcv"       # veth ends dmlcv1, dmlcv2 while being made
LC_IFACE="dmlc0"             # ... then renamed dmlc0 on both hosts (so one
                             # GLOO_SOCKET_IFNAME fits both, as eth0 would)
LC_SHM_DIR="/run/devmesh-launcher-check"  # holders' pid files (<view>.pid)
LC_LOCK="${LC_LOCK:-/run/devmesh-launcher-check.lock}"
LC_LOCK_WAIT_S="${LC_LOCK_WAIT_S:-3600}"
LC_VIEWS="1 2 1b"            # mount namespaces: host 1, host 2, host 1 again

lc_host_name() { echo "${LC_HOST_PREFIX}$1"; }
lc_host_addr() { echo "${LC_NET_PREFIX}.$1"; }
lc_host_ns() { echo "${LC_NS_PREFIX}$1"; }
# A view (1, 2, 1b) is a host number and an optional letter: its host.
lc_view_host() { echo "${1%%[!0-9]*}"; }

# The mount namespace file of view V (/proc/PID/ns/mnt of its holder);
# fails when the holder is gone.
lc_view_mnt() {
  local pid
  pid=$(cat "$LC_SHM_DIR/$1.pid" 2>/dev/null) || return 1
  [ -e "/proc/$pid/ns/mnt" ] || return 1
  echo "/proc/$pid/ns/mnt"
}

# lc_view_up V: starts view V's holder: a new mount namespace (private
# propagation, so nothing mounted here reaches the machine's and back) with
# its own tmpfs on /dev/shm, then `sleep` keeps it. Waits until the tmpfs is
# there (5 s at most).
lc_view_up() {
  local v="$1" pid i
  mkdir -p "$LC_SHM_DIR"
  unshare --mount --propagation private -- sh -c \
    'mount -t tmpfs -o mode=1777,nosuid,nodev "devmesh-lc-shm-$0" /dev/shm && exec sleep infinity' \
    "$v" </dev/null >/dev/null 2>&1 &
  pid=$!
  echo "$pid" > "$LC_SHM_DIR/$v.pid"
  for i in $(seq 50); do
    if [ "$(nsenter --mount="/proc/$pid/ns/mnt" findmnt -n -o SOURCE /dev/shm 2>/dev/null | tail -n 1)" = "devmesh-lc-shm-$v" ]; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "hosts.sh: no private /dev/shm for view $v" >&2
  return 1
}

# Ends every view's holder (TERM, then KILL after 2 s) and removes
# $LC_SHM_DIR. Their mount namespaces (and tmpfs) end with the last process
# in them: call after lc_host_kill_all.
lc_views_down() {
  local f pid i
  [ -d "$LC_SHM_DIR" ] || return 0
  for f in "$LC_SHM_DIR"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    # Only our holder: a sleep whose mount namespace is not the machine's.
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ] &&
      [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]; then
      kill "$pid" 2>/dev/null || true
      for i in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  rmdir "$LC_SHM_DIR" 2>/dev/null || true
}

# Runs a command on host N (1 or 2; or view 1b): in its mount namespace
# (its /dev/shm) and network namespace, in a fresh UTS namespace named after
# it (on_host.sh, a script so that `timeout` and launch agents can run it
# too).
lc_on_host() { "$LC_DIR/on_host.sh" "$@"; }

# Every process still running on host N (daemonized ones too, such as a
# slurmstepd, which ignores SIGTERM while its step winds down): TERM, up to
# 3 s, then KILL.
lc_host_kill_all() {
  local ns pids i
  ns="$(lc_host_ns "$1")"
  pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
  [ -z "$pids" ] && return 0
  kill $pids 2>/dev/null || true
  for i in $(seq 30); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -z "$pids" ] && return 0
    sleep 0.1
  done
  kill -9 $pids 2>/dev/null || true
}

lc_hosts_down() {
  local n
  ns_lock_held || return 0
  for n in 1 2; do
    lc_host_kill_all "$n"
  done
  # The views' mount namespaces hold copies of the netns mounts: end them
  # first, so that `ip netns del` frees the network namespaces.
  lc_views_down
  for n in 1 2; do
    ip netns del "$(lc_host_ns "$n")" 2>/dev/null || true
    rm -rf "/etc/netns/$(lc_host_ns "$n")"
  done
  ip link del "${LC_VETH_PREFIX}1" 2>/dev/null || true
}

lc_hosts_up() {
  ns_lock "$LC_LOCK" "$LC_LOCK_WAIT_S" || return 1
  lc_hosts_down
  local n other ns
  for n in 1 2; do
    ns="$(lc_host_ns "$n")"
    ip netns add "$ns"
    mkdir -p "/etc/netns/$ns"
    other=$((3 - n))
    printf '127.0.0.1 localhost\n127.0.1.1 %s\n%s %s\n' \
      "$(lc_host_name "$n")" "$(lc_host_addr "$other")" \
      "$(lc_host_name "$other")" > "/etc/netns/$ns/hosts"
  done
  ip link add "${LC_VETH_PREFIX}1" type veth peer name "${LC_VETH_PREFIX}2"
  for n in 1 2; do
    ns="$(lc_host_ns "$n")"
    ip link set "${LC_VETH_PREFIX}$n" netns "$ns"
    ip -n "$ns" link set "${LC_VETH_PREFIX}$n" name "$LC_IFACE"
    ip -n "$ns" addr add "$(lc_host_addr "$n")/24" dev "$LC_IFACE"
    ip -n "$ns" link set "$LC_IFACE" up
    ip -n "$ns" link set lo up
  done
  # After the network namespaces, so that each view's copy of the mounts
  # holds them (ip netns exec looks them up in /run/netns).
  local v
  for v in $LC_VIEWS; do
    lc_view_up "$v" || return 1
  done
}
