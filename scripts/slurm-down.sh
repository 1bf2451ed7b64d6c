#!/usr/bin/env bash
# Stops the one-node cluster scripts/slurm-up.sh started: exactly the PIDs it
# recorded in $MINREPRO_SLURM_DIR/pids (each checked to still be that daemon),
# nothing found by name. Jobs still running on the node are cancelled first.
# Safe to rerun: a cluster that is not running is nothing to do.
set -euo pipefail

DIR="${MINREPRO_SLURM_DIR:-/tmp/minrepro-slurm}"
export SLURM_CONF="$DIR/slurm.conf"

if [ ! -f "$DIR/pids" ]; then
  echo "slurm-down: no cluster recorded in $DIR"
  exit 0
fi

pids=()
while read -r name pid; do
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] && pids+=("$pid")
done <"$DIR/pids"

if [ ${#pids[@]} -gt 0 ]; then
  # Jobs of this test cluster only (SLURM_CONF points at it).
  scancel --quiet --partition=debug 2>/dev/null || true
  # Let the jobs end while slurmd is there to reap them: a slurmstepd whose
  # slurmd is gone would be left behind.
  for _ in $(seq 1 60); do
    [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
    sleep 0.25
  done
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 40); do
    alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && break
    sleep 0.25
  done
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true; done
  echo "slurm-down: stopped ${pids[*]}"
else
  echo "slurm-down: recorded daemons are not running"
fi
rm -f "$DIR/pids"
