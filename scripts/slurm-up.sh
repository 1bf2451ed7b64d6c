#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine, for testing minrepro's
# Slurm executor (tests/slurm_test.cc, bench/bench_slurm.sh). Needs root.
#
#   scripts/slurm-up.sh            install (if missing), configure, start, wait for the node
#   source "$MINREPRO_SLURM_DIR/env.sh"   (or export SLURM_CONF=...) to use it
#   scripts/slurm-down.sh          stop exactly the daemons this script started
#   scripts/slurm-up.sh --running  exit 0 when it is up, starts nothing
#
# Everything lives under $MINREPRO_SLURM_DIR (default /tmp/minrepro-slurm):
# slurm.conf, state, logs, the daemons' PIDs (pids). No systemd, no
# /etc/slurm: clients find the cluster through SLURM_CONF, so a machine's own
# Slurm setup is left alone. Safe to rerun: a running cluster is reused.
# Authentication is auth/none (no munge daemon to start): the cluster listens
# on localhost only and exists for tests.
set -euo pipefail

DIR="${MINREPRO_SLURM_DIR:-/tmp/minrepro-slurm}"
CTLD_PORT="${MINREPRO_SLURM_PORT:-6817}"
SLURMD_PORT=$((CTLD_PORT + 1))
NODE="$(hostname -s)"
CONF="$DIR/slurm.conf"
export SLURM_CONF="$CONF"

die() { echo "slurm-up: $*" >&2; exit 1; }

install_slurm() {
  local missing=()
  for p in slurmctld slurmd slurm-client; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "slurm-up: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The PIDs in $DIR/pids that are still our daemons (checked by name, so a
# reused PID is never taken for a daemon).
running_pids() {
  [ -f "$DIR/pids" ] || return 0
  local pid name
  while read -r name pid; do
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] && echo "$pid"
  done <"$DIR/pids"
}

write_conf() {
  local cpus mem
  cpus="$(nproc)"
  mem="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
  # proctrack/pgid and task/none: no cgroup setup needed in a container.
  # MinJobAge: finished jobs stay visible to `scontrol show job` for 10 min,
  # which is how the executor reads a job's final state.
  cat >"$CONF" <<EOF
ClusterName=minrepro
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_interval=1
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=2
InactiveLimit=0
MpiDefault=none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
  cat >"$DIR/env.sh" <<EOF
export SLURM_CONF="$CONF"
EOF
}

node_state() { sinfo -h -N -n "$NODE" -o %t 2>/dev/null | head -1; }

wait_idle() {
  local state=""
  for _ in $(seq 1 60); do
    state="$(node_state)"
    case "$state" in
      idle|mix|alloc) echo "slurm-up: node $NODE $state; SLURM_CONF=$CONF"; return 0 ;;
      down*|drain*) scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
  done
  die "node $NODE did not become idle (state '${state:-unknown}'); see $DIR/log/slurmctld.log and slurmd.log"
}

start_daemons() {
  : >"$DIR/pids"
  # -D: stay in the foreground, so $! is the daemon itself (recorded for slurm-down.sh).
  # -c: start without the jobs of an earlier run (a test cluster keeps none).
  setsid slurmctld -D -c -i -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 </dev/null &
  echo "slurmctld $!" >>"$DIR/pids"
  for _ in $(seq 1 40); do scontrol ping >/dev/null 2>&1 && break; sleep 0.25; done
  scontrol ping >/dev/null 2>&1 || die "slurmctld did not answer; see $DIR/log/slurmctld.log"
  setsid slurmd -D -N "$NODE" -f "$CONF" >>"$DIR/log/slurmd.out" 2>&1 </dev/null &
  echo "slurmd $!" >>"$DIR/pids"
}

# --running: exit 0 when this script's cluster is up (for callers that
# stop only what they started).
if [ "${1:-}" = "--running" ]; then
  [ "$(running_pids | wc -l)" -eq 2 ]
  exit
fi
install_slurm
mkdir -p "$DIR"
if [ "$(running_pids | wc -l)" -eq 2 ]; then
  echo "slurm-up: already running ($(tr '\n' ' ' <"$DIR/pids"))"
else
  [ -n "$(running_pids)" ] && die "only part of the cluster runs; stop it with scripts/slurm-down.sh, then rerun"
  write_conf
  start_daemons
fi
wait_idle
