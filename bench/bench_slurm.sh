#!/usr/bin/env bash
# Slurm against local, measured in one run on the one-node test cluster
# (started here with scripts/slurm-up.sh when it is not up, and stopped
# again afterwards):
#  1. the raw cost of a job running `true`: srun against sbatch + polling
#     scontrol (the choice made in engine/executors/slurm_executor.cc);
#  2. per-trial wall time of LocalExecutor against SlurmExecutor on
#     /bin/true, one at a time and 4 at once (bench_slurm);
#  3. minrepro shrink of the bundled class4 example, local (fork servers)
#     against --executor slurm, both --jobs 2: wall time, trials, result.
# Usage: bench/bench_slurm.sh [BUILD_DIR] [TRIALS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
# The Python whose torch the build is against makes the cases and runs the archives.
py=$("$build/minrepro" --version | sed -n 's/^PyTorch from: //p')
trials=${2:-20}
export MINREPRO_SLURM_DIR=${MINREPRO_SLURM_DIR:-/tmp/minrepro-slurm}
export SLURM_CONF="$MINREPRO_SLURM_DIR/slurm.conf"
work=$(mktemp -d)
cleanup() { rm -rf "$work"; }
if ! "$here/../scripts/slurm-up.sh" --running; then
  cleanup() { rm -rf "$work"; "$here/../scripts/slurm-down.sh"; }
  "$here/../scripts/slurm-up.sh"
fi
trap cleanup EXIT

now() { date +%s%N; }
median_ms() { sort -n | awk '{a[NR] = $1} END {printf "%.0f", a[int((NR + 1) / 2)] / 1e6}'; }

srun_once() { local t=$(now); srun -n1 -Q true; echo $(($(now) - t)); }
sbatch_once() {
  local t=$(now) id state
  id=$(sbatch --parsable -o /dev/null --wrap true </dev/null)  # not -Q: it hides the id
  id=${id%%;*}
  while :; do
    state=$(scontrol -o show job "$id" | grep -o 'JobState=[A-Z_]*' || true)
    case "$state" in JobState=COMPLETED|JobState=FAILED|JobState=CANCELLED) break ;; esac
    sleep 0.02
  done
  echo $(($(now) - t))
}
echo "1. a job running 'true', median of $trials:"
echo "   srun:                    $(for _ in $(seq "$trials"); do srun_once; done | median_ms) ms"
echo "   sbatch + scontrol poll:  $(for _ in $(seq "$trials"); do sbatch_once; done | median_ms) ms"

echo "2. executors:"
"$build/bench/bench_slurm" "$trials" | sed 's/^/   /'

echo "3. minrepro shrink class4, --jobs 2:"
"$py" "$here/../configs/examples/make_examples.py" "$work" >/dev/null
declare -A secs result
for executor in local slurm; do
  start=$(now)
  "$build/minrepro" shrink --config "$work/class4/case.yaml" --executor "$executor" --jobs 2 --quiet \
    --output "$work/$executor.tar.gz" --work-dir "$work/w-$executor"
  secs[$executor]=$(echo "($(now) - $start) / 1000000000" | bc -l)
  result[$executor]=$(tar xzf "$work/$executor.tar.gz" -O REPORT.md | grep -E "Kept sample ids|^- [0-9]+ trials" | tr '\n' ' ')
  printf "   %-5s %6.1f s  %s\n" "$executor" "${secs[$executor]}" "${result[$executor]}"
done
printf "   ratio slurm/local %.1f; same result: %s\n" "$(echo "${secs[slurm]} / ${secs[local]}" | bc -l)" \
  "$([ "${result[local]}" == "${result[slurm]}" ] && echo yes || echo NO)"
