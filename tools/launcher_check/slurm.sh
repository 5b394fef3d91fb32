# tools/launcher_check/slurm.sh: a Slurm cluster of the two namespace hosts
# of hosts.sh, started and stopped by tools/launcher_check.sh (sourced).
# munged (a private key and socket), slurmctld on host 1 and one slurmd per
# host run in the foreground as children of the script, so that the script
# ends them by process id. slurm.conf is written at run time under the
# script's work directory; no file outside it is touched, no system daemon
# is used. Ports 16817/16818 are inside the namespaces only.
#
# Needs: slurm-wlm (slurmctld, slurmd, srun, scontrol, sinfo), munge.
# slurmd wants a cgroup file system even with proctrack/linuxproc: each
# slurmd gets an empty tmpfs on /sys/fs/cgroup in its own mount namespace
# (cgroup/v1 with CgroupAutomount finds nothing to confine and carries on).

LC_SLURM_PIDS=()

lc_slurm_conf() {
  local dir="$1"
  mkdir -p "$dir"/{state,spool,log}
  cat > "$dir/slurm.conf" <<CONF
ClusterName=devmeshcheck
SlurmctldHost=$(lc_host_name 1)($(lc_host_addr 1))
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SlurmUser=root
SlurmdUser=root
SlurmdParameters=config_overrides
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SchedulerType=sched/builtin
SelectType=select/linear
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$(lc_host_name 1) NodeAddr=$(lc_host_addr 1) CPUs=4 State=UNKNOWN
NodeName=$(lc_host_name 2) NodeAddr=$(lc_host_addr 2) CPUs=4 State=UNKNOWN
PartitionName=check Nodes=$(lc_host_name 1),$(lc_host_name 2) Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
  printf 'CgroupPlugin=cgroup/v1\nCgroupAutomount=yes\n' > "$dir/cgroup.conf"
}

# lc_slurm_up DIR: starts munged, slurmctld and both slurmds; waits (up to
# 60 s) until both nodes are idle. Non-zero when they are not.
lc_slurm_up() {
  local dir="$1"
  lc_slurm_conf "$dir"
  export SLURM_CONF="$dir/slurm.conf"
  dd if=/dev/urandom of="$dir/munge.key" bs=128 count=1 status=none
  chmod 600 "$dir/munge.key"
  munged --foreground --force --key-file="$dir/munge.key" \
    --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed" &
  LC_SLURM_PIDS+=($!)
  local i
  for i in $(seq 50); do [ -S "$dir/munge.sock" ] && break; sleep 0.1; done
  "$LC_DIR/on_host.sh" 1 slurmctld -D -i > "$dir/log/slurmctld.out" 2>&1 &
  LC_SLURM_PIDS+=($!)
  local n
  for n in 1 2; do
    "$LC_DIR/on_host.sh" "$n" sh -c 'mount -t tmpfs cgroup /sys/fs/cgroup && exec slurmd -D -N "$0"' \
      "$(lc_host_name "$n")" > "$dir/log/slurmd.$n.out" 2>&1 &
    LC_SLURM_PIDS+=($!)
  done
  for i in $(seq 120); do
    if [ "$(lc_on_host 1 sinfo -h -o '%t' 2>/dev/null | sort -u | tr -d '\n')" = "idle" ]; then
      return 0
    fi
    sleep 0.5
  done
  echo "launcher_check: the Slurm nodes did not become idle within 60 s:" >&2
  lc_on_host 1 sinfo >&2 || true
  tail -n 5 "$dir"/log/*.log >&2 || true
  return 1
}

lc_slurm_down() {
  local pid
  for pid in "${LC_SLURM_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${LC_SLURM_PIDS[@]}"; do
    timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
  done
  LC_SLURM_PIDS=()
}
