# tools/ns_lock.sh: one run at a time on a set of namespace hosts, sourced by
# the scripts that make them (tools/launcher_check/hosts.sh,
# tools/scale_check.sh, tools/etcd_cluster_check.sh). Two runs of one script
# (or of two scripts over the same namespaces) at once would tear down each
# other's hosts and join each other's stores.
#
# ns_lock LOCKFILE WAIT_S: takes an exclusive flock on LOCKFILE through an fd
# this shell keeps until it exits (so a killed script releases it; a process
# it started that outlives it holds it too: `fuser -v LOCKFILE` names them),
# waiting up to WAIT_S seconds and saying so. Sets NS_LOCK_FD. Returns 1,
# with a message, when another run held it past the wait; 0 at once when this
# shell holds it already.
# ns_lock_held: whether this shell holds it (a cleanup trap tears the hosts
# down only then, leaving another run's alone).

NS_LOCK_FD=""

ns_lock() {
  local lock="$1" wait_s="$2" fd
  [ -n "$NS_LOCK_FD" ] && return 0
  exec {fd}>>"$lock"
  if ! flock -n "$fd"; then
    echo "$(basename "$0"): another run holds these namespace hosts ($lock); waiting up to $wait_s s" >&2
    if ! flock -w "$wait_s" "$fd"; then
      echo "$(basename "$0"): the namespace hosts are still in use after $wait_s s ($lock; its holders: fuser -v $lock)" >&2
      exec {fd}>&-
      return 1
    fi
  fi
  NS_LOCK_FD="$fd"
}

ns_lock_held() { [ -n "$NS_LOCK_FD" ]; }
