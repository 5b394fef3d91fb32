#!/usr/bin/env bash
# tools/launcher_check/rsh_agent.sh HOST COMMAND...: Open MPI's launch agent
# (mpirun --mca plm_rsh_agent) for the namespace hosts of hosts.sh: where
# mpirun would ssh to HOST, run COMMAND on that host instead. HOST is a host
# name (dmh2) or address (10.231.7.2); COMMAND runs as on_host.sh runs it
# (the host's /dev/shm, network namespace and host name).
set -euo pipefail
source "$(dirname "$0")/hosts.sh"
host="$1"; shift
for n in 1 2; do
  if [ "$host" = "$(lc_host_name "$n")" ] || [ "$host" = "$(lc_host_addr "$n")" ]; then
    # ssh hands the remote shell one command line; so does this.
    exec "$(dirname "$0")/on_host.sh" "$n" sh -c "$*"
  fi
done
echo "rsh_agent.sh: unknown host '$host'" >&2
exit 255
