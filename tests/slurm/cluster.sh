#!/usr/bin/env bash
# A real single-node Slurm on this machine, for the tests and for trying `tfw run --executor
# slurm` by hand: munged with its own key, slurmctld and slurmd, all as root, all their files
# (config, state, spool, logs, pid files) in one folder, on free ports.
#
#   bash tests/slurm/cluster.sh up DIR     # start; prints `export SLURM_CONF=DIR/slurm.conf`
#   bash tests/slurm/cluster.sh down DIR   # stop the daemons it started (by their pid files)
#
# Needs root and Debian's slurm-wlm and munge (scripts/setup installs them). Nothing outside
# DIR is touched: munge's socket is DIR/munge/munge.socket (slurm.conf's AuthInfo points at
# it), so a machine's own munged or Slurm is left alone. docs/cluster.md, "Slurm on one machine".
set -euo pipefail
command=${1:-}
dir=${2:-}
if [ -z "$command" ] || [ -z "$dir" ]; then
  echo "usage: bash tests/slurm/cluster.sh up|down DIR" >&2
  exit 2
fi

stop_pid_files() {  # stop_pid_files FILE...: SIGTERM each daemon, wait up to 10 s for all, then SIGKILL
  local file pid pids=()
  for file in "$@"; do
    [ -s "$file" ] || continue
    pid=$(cat "$file")
    kill -0 "$pid" 2> /dev/null || { rm -f "$file"; continue; }
    kill -TERM "$pid" 2> /dev/null || true
    pids+=("$pid")
  done
  # Signalled together: each takes about 2 s to stop, so one after the other took 6 s.
  for _ in $(seq 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2> /dev/null; then
      echo "cluster.sh: pid $pid did not stop on SIGTERM; killing it" >&2
      kill -KILL "$pid" 2> /dev/null || true
    fi
  done
  rm -f "$@"
}

case "$command" in
  down)
    stop_pid_files "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"
    exit 0
    ;;
  up) ;;
  *) echo "cluster.sh: unknown command '$command' (expected up or down)" >&2; exit 2 ;;
esac

if [ "$(id -u)" != 0 ]; then
  echo "cluster.sh: needs root (slurmd runs jobs as their user, munged and slurmctld as root here)" >&2
  exit 2
fi
for program in munged slurmctld slurmd sbatch; do
  if ! command -v "$program" > /dev/null; then
    echo "cluster.sh: $program not found; install Debian's slurm-wlm and munge (bash scripts/setup does)" >&2
    exit 2
  fi
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chmod 700 "$dir/munge"
if [ ! -s "$dir/munge/munge.key" ]; then
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=128 count=1 status=none
  chmod 600 "$dir/munge/munge.key"
fi
munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

free_port() { /usr/bin/python3 -c "import socket; s=socket.socket(); s.bind(('',0)); print(s.getsockname()[1])"; }
host=$(hostname)
# The cores this process may run on: nproc, which would print OMP_NUM_THREADS instead where
# it is set (the suite sets it to 1: tests/CMakeLists.txt), and a 1-CPU node leaves a job of
# --cpus-per-task 2 pending for ever.
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
cat > "$dir/slurm.conf" << EOF
# A single-node Slurm for tfw's tests (tests/slurm/cluster.sh).
ClusterName=tfwtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
MinJobAge=3600
KillWait=10
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 300); do
  state=$(sinfo -h -o %t 2> /dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.1
done
if [ "$state" != idle ]; then
  echo "cluster.sh: the node did not become idle within 30 s (sinfo: '$state'); logs in $dir/log" >&2
  tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
  exit 1
fi
echo "export SLURM_CONF=$SLURM_CONF"
