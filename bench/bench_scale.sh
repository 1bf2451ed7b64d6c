#!/usr/bin/env bash
# Batches of growing size (bench/make_scale_case.py: one target 4 among N
# samples of 64 float32 features, flaky handling off), shrunk with the
# built-in harness and with a Python command, --jobs 1 and 2, one run each.
# Per run: wall time, trials, the sum of the trials' own durations, the
# self-check's share of the time, minrepro's
# own peak memory (VmHWM, from its log) and the peak of the largest process
# of the run (GNU time's %M: the maximum over minrepro and every process it
# waited for, i.e. trials, fork servers and their children, which count the
# memory they share with their server).
# Usage: bench/bench_scale.sh [BUILD_DIR] [N ...]   (default N: 1000 10000 100000 1000000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
# The Python whose torch the build is against makes the cases and runs the archives.
py=$("$build/minrepro" --version | sed -n 's/^PyTorch from: //p')
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000 100000 1000000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf "%-9s %-8s %-4s %9s %7s %8s %9s %10s %12s %16s %s\n" N mode jobs batch_MB wall_s trials trials_s selfchk_s minrepro_MB largest_proc_MB result
for n in "${sizes[@]}"; do
  "$py" "$here/make_scale_case.py" "$n" "$work/case" >/dev/null
  batch_mb=$(echo "$(stat -c %s "$work/case/batch.pt") / 1000000" | bc -l)
  for mode in harness command; do
    for jobs in 1 2; do
      rm -rf "$work/w"
      /usr/bin/time -f "%e %M" -o "$work/time" "$build/minrepro" shrink --config "$work/case/$mode.yaml" \
        --work-dir "$work/w" --output "$work/out.tar.gz" --jobs "$jobs" --quiet || true
      read -r wall tree_kb < "$work/time"
      log="$work/w/minrepro.log"
      trials=$(grep -o "in [0-9]* trials; archive" "$log" | grep -o "[0-9]*" || echo "?")
      own=$(grep -o "minrepro's own peak [0-9.]* MB" "$log" | grep -o "[0-9.]*" || echo "?")
      check_start=$(grep "checking the archive on its own" "$log" | grep -o "^\[ *[0-9.]*" | tr -d '[ ' || echo 0)
      check_end=$(grep "self-check:" "$log" | grep -o "^\[ *[0-9.]*" | tr -d '[ ' || echo 0)
      # The trials' own time: the sum of each trial's duration (its log line's last figure).
      trial_s=$(grep -o "^\[ *[0-9.]*s\]   trial [0-9]*: .* \([0-9.]*\) s)$" "$log" | grep -o "[0-9.]* s)$" | grep -o "[0-9.]*" |
                paste -sd+ | bc -l)
      result=$(grep -o "reduced [0-9]* -> [0-9]* samples (ids \[[0-9, ]*\])" "$log" || echo "FAILED")
      printf "%-9s %-8s %-4s %9.1f %7.1f %8s %9.1f %10.1f %12s %16.0f %s\n" "$n" "$mode" "$jobs" "$batch_mb" "$wall" "$trials" "${trial_s:-0}" \
        "$(echo "${check_end:-0} - ${check_start:-0}" | bc -l)" "$own" "$(echo "$tree_kb / 1024" | bc -l)" "$result"
    done
  done
done
