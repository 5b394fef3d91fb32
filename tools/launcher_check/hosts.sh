# tools/launcher_check/hosts.sh: two "hosts" on one machine, sourced by
# tools/launcher_check.sh. Each host is a network namespace (iproute2) with
# its own veth address, entered through a fresh UTS namespace that carries
# its host name. The two are joined by one veth pair; nothing is routed
# outside them. Its /etc/hosts (ip netns exec bind-mounts /etc/netns/NS/hosts)
# is Debian's default shape: the host's own name on 127.0.1.1, the other
# host's name on its veth address, so that "what my host name resolves to"
# is loopback, the trap that GLOO_SOCKET_IFNAME used to be needed for.
#
# Needs: root, ip (iproute2), unshare (util-linux).

LC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LC_NET_PREFIX="10.231.7"     # host N gets ${LC_NET_PREFIX}.N
LC_NS_PREFIX="dmlc-h"        # network namespaces dmlc-h1, dmlc-h2
LC_HOST_PREFIX="dmh"         # host names dmh1, dmh2
LC_VETH_PREFIX="dmlcv"       # veth ends dmlcv1, dmlcv2 while being made
LC_IFACE="dmlc0"             # ... then renamed dmlc0 on both hosts (so one
                             # GLOO_SOCKET_IFNAME fits both, as eth0 would)

lc_host_name() { echo "${LC_HOST_PREFIX}$1"; }
lc_host_addr() { echo "${LC_NET_PREFIX}.$1"; }
lc_host_ns() { echo "${LC_NS_PREFIX}$1"; }

# Runs a command on host N (1 or 2): in its network namespace, in a fresh
# UTS namespace named after it (on_host.sh, a script so that `timeout` and
# launch agents can run it too).
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
  for n in 1 2; do
    lc_host_kill_all "$n"
    ip netns del "$(lc_host_ns "$n")" 2>/dev/null || true
    rm -rf "/etc/netns/$(lc_host_ns "$n")"
  done
  ip link del "${LC_VETH_PREFIX}1" 2>/dev/null || true
}

lc_hosts_up() {
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
}
