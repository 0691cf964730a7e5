#!/usr/bin/env bash
# A single-node Slurm cluster for the tests, kept entirely in one directory.
#
#   .ci/slurm-cluster.sh start  DIR   write a munge key and the configs into DIR, start munged, slurmctld and
#                                     slurmd in the foreground mode of each (pids recorded in DIR/*.pid), and wait
#                                     until the node is idle
#   .ci/slurm-cluster.sh stop   DIR   cancel the cluster's jobs, then stop the recorded daemons (TERM, wait, KILL)
#   .ci/slurm-cluster.sh status DIR   the recorded daemons and sinfo; exit 1 when the cluster is not up
#   .ci/slurm-cluster.sh env    DIR   prints `export SLURM_CONF=DIR/slurm.conf` (eval it to use the cluster)
#
# Read at start (the configs are written anew each time):
#   CTLD_PORT=6817 SLURMD_PORT=6818   a busy port refuses the start (set other ports beside another cluster)
#   MCSLOTS=2        count of the `mcslot` GRES on the node (a per-node cap on episodes: --gres=mcslot:1)
#   CPUS=            the node's CPU count (default: the real one, from `slurmd -C`)
#   KILLWAIT=5       seconds between SIGTERM and SIGKILL when a job is cancelled or hits its time limit
#   START_TIMEOUT=60 seconds to wait for the node to become idle
#
# Only pids this script recorded are ever signalled, each after checking /proc/PID/exe is the daemon it started.
# Accounting is off (no slurmdbd): `sacct` answers "accounting storage is disabled", so finished jobs are read from
# `squeue -t all` for MinJobAge (an hour). Processes of a job are tracked by cgroup where a v1 freezer hierarchy is
# writable (then scancel reaches daemonised children too), else by linuxproc.
set -u -o pipefail

say() { echo "slurm-cluster: $*" >&2; }
fail() { say "ERROR: $*"; [ "${STARTING:-0}" = 1 ] && { STARTING=0; say "stopping what was started"; stop_cluster; }; exit 1; }

action=${1:-}
DIR=${2:-}
[ -n "$action" ] && [ -n "$DIR" ] || { echo "usage: $0 start|stop|status|env DIR" >&2; exit 2; }
mkdir -p "$DIR" || fail "cannot create $DIR"
DIR=$(cd "$DIR" && pwd -P)
export SLURM_CONF="$DIR/slurm.conf"
CTLD_PORT=${CTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
MCSLOTS=${MCSLOTS:-2}
KILLWAIT=${KILLWAIT:-5}
START_TIMEOUT=${START_TIMEOUT:-60}
NODE=$(hostname -s)
SOCKET="$DIR/munge/munge.socket.2"
DAEMONS="munged slurmctld slurmd"

# recorded_pid NAME: the pid in DIR/NAME.pid when that process is alive and still runs the NAME binary
recorded_pid() {
  local file="$DIR/$1.pid" pid exe
  [ -s "$file" ] || return 1
  pid=$(tr -dc 0-9 <"$file")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  case "$(basename "$exe")" in "$1" | "$1-wlm") ;; *) return 1 ;; esac  # else the pid was reused (Debian: slurmd-wlm)
  echo "$pid"
}

# stop_recorded GRACE NAME...: SIGTERM each recorded daemon, wait up to GRACE seconds, SIGKILL what is left
stop_recorded() {
  local grace=$1 name pid i waiting; shift
  local -A pids=()
  for name in "$@"; do
    if pid=$(recorded_pid "$name"); then pids[$name]=$pid; kill -TERM "$pid" 2>/dev/null; else rm -f "$DIR/$name.pid"; fi
  done
  for ((i = 0; i < grace * 10; i++)); do
    waiting=0
    for name in "${!pids[@]}"; do [ -d "/proc/${pids[$name]}" ] && waiting=1; done
    [ $waiting = 0 ] && break
    sleep 0.1
  done
  for name in "${!pids[@]}"; do
    pid=${pids[$name]}
    if [ -d "/proc/$pid" ]; then
      say "$name (pid $pid) ignored SIGTERM for ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null
      for ((i = 0; i < 50; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    fi
    if [ -d "/proc/$pid" ]; then say "WARNING: $name (pid $pid) is still there"; else rm -f "$DIR/$name.pid"; fi
  done
}

port_in_use() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# start_daemon NAME LOG COMMAND...: in its own session, so that $! is the daemon itself; the pid is recorded
start_daemon() {
  local name=$1 log=$2; shift 2
  setsid "$@" >>"$log" 2>&1 </dev/null &
  echo $! >"$DIR/$name.pid"
}

# within SECONDS COMMAND...: true once COMMAND succeeds, false at the deadline
within() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}

node_ready() { sinfo -h -N -n "$NODE" -o '%t' 2>/dev/null | grep -Eqx 'idle|mix|alloc'; }

write_configs() {
  local hardware tracking=linuxproc overrides=""
  hardware=$(slurmd -C 2>/dev/null | head -1) || fail "slurmd -C failed: is slurmd installed?"
  hardware=${hardware#NodeName=* }  # "CPUs=2 Boards=1 ... RealMemory=24105"
  if [ -n "${CPUS:-}" ]; then
    hardware="CPUs=$CPUS RealMemory=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hardware")"
    overrides="SlurmdParameters=config_overrides"
  fi
  local probe=/sys/fs/cgroup/freezer/.slurm_cluster_probe_$$
  if mkdir "$probe" 2>/dev/null; then rmdir "$probe"; tracking=cgroup; fi
  cat >"$DIR/slurm.conf" <<EOF
# written by .ci/slurm-cluster.sh: a single-node cluster for the tests
ClusterName=ci
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pidfile
SlurmdPidFile=$DIR/run/slurmd.pidfile
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/$tracking
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=$KILLWAIT
MinJobAge=3600
InactiveLimit=0
GresTypes=mcslot
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$overrides
NodeName=$NODE NodeAddr=127.0.0.1 $hardware Gres=mcslot:$MCSLOTS State=UNKNOWN
PartitionName=ci Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  echo "NodeName=$NODE Name=mcslot Count=$MCSLOTS" >"$DIR/gres.conf"
  cat >"$DIR/cgroup.conf" <<EOF
CgroupPlugin=autodetect
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
IgnoreSystemdOnFailure=yes
EOF
  say "process tracking: proctrack/$tracking"
}

start_munge() {
  mkdir -p "$DIR/munge" && chmod 0755 "$DIR/munge"  # 0700 would keep non-root clients off the socket
  if [ ! -s "$DIR/munge/munge.key" ]; then
    mungekey --create --keyfile="$DIR/munge/munge.key" 2>>"$DIR/log/munged.log" || fail "mungekey failed"
  fi
  chmod 0400 "$DIR/munge/munge.key"
  rm -f "$SOCKET" "$SOCKET.lock"
  start_daemon munged "$DIR/log/munged.out" munged -F --force --socket="$SOCKET" \
    --key-file="$DIR/munge/munge.key" --pid-file="$DIR/run/munged.pidfile" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  within 10 bash -c "munge -n -S '$SOCKET' | unmunge -S '$SOCKET'" \
    || { tail -n 5 "$DIR/log/munged.log" "$DIR/log/munged.out" >&2; fail "munged did not answer on $SOCKET"; }
}

start_cluster() {
  local started_at=$SECONDS name
  for name in munged mungekey slurmctld slurmd sinfo sbatch; do
    command -v "$name" >/dev/null || fail "$name not found: apt-get install -y slurm-wlm munge"
  done
  if recorded_pid slurmctld >/dev/null && recorded_pid slurmd >/dev/null && recorded_pid munged >/dev/null \
     && node_ready; then
    say "already running in $DIR"; return 0
  fi
  for name in $DAEMONS; do
    if recorded_pid "$name" >/dev/null; then say "a partial cluster is running in $DIR: stopping it first"; stop_cluster; break; fi
  done
  STARTING=1
  for port in "$CTLD_PORT" "$SLURMD_PORT"; do
    port_in_use "$port" && fail "port $port is in use (another cluster? set CTLD_PORT and SLURMD_PORT)"
  done
  mkdir -p "$DIR"/{state,spool,log,run}
  write_configs
  start_munge
  start_daemon slurmctld "$DIR/log/slurmctld.out" slurmctld -D -f "$DIR/slurm.conf"
  within 20 scontrol ping \
    || { tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmctld.out" >&2; fail "slurmctld does not answer"; }
  start_daemon slurmd "$DIR/log/slurmd.out" slurmd -D -f "$DIR/slurm.conf" -N "$NODE"
  if ! within "$START_TIMEOUT" node_ready; then
    sinfo -N -l >&2; tail -n 20 "$DIR/log/slurmd.log" "$DIR/log/slurmd.out" >&2
    fail "node $NODE not idle after ${START_TIMEOUT}s (logs in $DIR/log)"
  fi
  STARTING=0
  say "up in $((SECONDS - started_at))s: export SLURM_CONF=$SLURM_CONF"
}

stop_cluster() {
  local jobs deadline leftovers
  if recorded_pid slurmctld >/dev/null && scontrol ping >/dev/null 2>&1; then
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
      say "cancelling the cluster's jobs: $jobs"
      scancel $jobs 2>/dev/null
      deadline=$((SECONDS + KILLWAIT + 15))
      while [ -n "$(squeue -h -o %A 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
    fi
  fi
  if recorded_pid slurmd >/dev/null; then  # job processes slurmd still tracks, by the pids it reports
    leftovers=$(scontrol listpids 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}')
    [ -n "$leftovers" ] && { say "killing leftover job pids: $leftovers"; kill -KILL $leftovers 2>/dev/null; }
  fi
  stop_recorded 15 slurmd slurmctld
  stop_recorded 30 munged
  rm -f "$SOCKET" "$SOCKET.lock"
  # proctrack/cgroup leaves empty cgroups per node behind; rmdir removes only empty ones
  find /sys/fs/cgroup/*/slurm_"$NODE" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  say "stopped ($DIR)"
}

cluster_status() {
  local name pid healthy=0
  for name in $DAEMONS; do
    if pid=$(recorded_pid "$name"); then echo "$name: running (pid $pid)"
    elif [ -e "$DIR/$name.pid" ]; then echo "$name: DEAD (stale $name.pid)"; healthy=1
    else echo "$name: not running"; healthy=1; fi
  done
  [ -f "$SLURM_CONF" ] && timeout 10 sinfo 2>&1 || healthy=1
  return $healthy
}

case $action in
  start) start_cluster ;;
  stop) stop_cluster ;;
  status) cluster_status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  *) echo "usage: $0 start|stop|status|env DIR" >&2; exit 2 ;;
esac
