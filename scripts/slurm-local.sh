#!/usr/bin/env bash
# Starts a one-node SLURM cluster on this machine (slurmctld + slurmd + munged, as root) for
# hone's SLURM tests; idempotent: a running, idle cluster is left as it is.
# Installs Debian's slurm-wlm and munge when missing. Usage: scripts/slurm-local.sh [--stop]
set -euo pipefail

if [ "${1:-}" = "--stop" ]; then
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
  pkill -x munged 2>/dev/null || true
  exit 0
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge
fi

host=$(hostname -s)
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
fi

mem_mib=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
conf=$(cat <<CONF
# written by hone scripts/slurm-local.sh
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=$host CPUs=$(nproc) RealMemory=$mem_mib State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
# Never touch a real cluster's configuration: only a file this script wrote is replaced.
# (An earlier version wrote no marker; its file starts with `ClusterName=local`.)
if [ -s /etc/slurm/slurm.conf ] && ! grep -q '^# written by hone scripts/slurm-local.sh' /etc/slurm/slurm.conf \
   && [ "$(head -1 /etc/slurm/slurm.conf)" != "ClusterName=local" ]; then
  echo "slurm: /etc/slurm/slurm.conf exists and was not written by this script; leaving SLURM alone" >&2
  echo "(the SLURM tests need a node of their own: run them where this script may set one up)" >&2
  exit 1
fi
if [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" != "$conf" ]; then
  printf '%s\n' "$conf" > /etc/slurm/slurm.conf
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
  # Wait for them to be gone, so that they are started again below with the new file.
  for _ in $(seq 100); do
    pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break
    sleep 0.1
  done
fi
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd

for _ in $(seq 100); do
  state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null || true)
  case "$state" in
    idle|mixed|allocated) echo "slurm: node $host $state"; exit 0 ;;
    down*|drain*) timeout 5 scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
  esac
  sleep 0.3
done
echo "slurm: the node did not become idle; see /var/log/slurm/" >&2
exit 1
