#!/usr/bin/env bash
# The cost around the search (#34), whole-process, one run each on this
# machine: a user's own step script importing torch (bench/fixed_cost/step.py,
# a small CNN and an AdamW step), N samples (256 by default) with one bad
# label, started without a case.yaml. minrepro shrink -j1 and -j2, then
# C-Vise -n 2 on the same step (the sample positions as lines, the same
# first message as the test). Prints each run's wall time, trials and the
# phases minrepro logs (`time:` lines), the fixed cost after the search
# against the search's own time, -j2/-j1, and C-Vise against -j2.
# With --examples instead: each bundled example once at -j2, its wall time
# and its phases.
# Usage: bench/bench_fixed_cost.sh [BUILD_DIR] [N] [--no-cvise | --examples]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
n=${2:-256}
cvise_too=yes
[ "${3:-}" == "--no-cvise" ] && cvise_too=no
py="${MINREPRO_PYTHON:-$here/../.venv/bin/python}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${3:-}" == "--examples" ]; then
  "$py" "$here/../configs/examples/make_examples.py" "$work/examples" > /dev/null
  for case in "$work"/examples/*/case.yaml; do
    name=$(basename "$(dirname "$case")")
    start=$(date +%s.%N)
    "$build/minrepro" shrink --config "$case" --jobs 2 --quiet --work-dir "$work/w-$name" --output "$work/$name.tar.gz" \
      || echo "$name: exit $?"
    printf "%s: %.1f s wall, %s\n" "$name" "$(echo "$(date +%s.%N) - $start" | bc -l)" \
      "$(grep -o "in [0-9]* trials; archive" "$work/w-$name/minrepro.log" | grep -o "[0-9]* trials")"
    grep "time: " "$work/w-$name/minrepro.log" | sed 's/^\[ *[0-9.]*s\] time: /    /'
  done
  exit 0
fi
cp "$here"/fixed_cost/{step.py,make_batch.py,subset.py} "$work/"
"$py" "$work/make_batch.py" "$n" "$work/batch.pt"
phase() { sed -n "s/.*time: phases: .*$1 \([0-9.]*\) s.*/\1/p" "$2" | tail -1; }
declare -A wall
for jobs in 1 2; do
  start=$(date +%s.%N)
  (cd "$work" && "$build/minrepro" shrink --batch batch.pt --jobs "$jobs" --quiet --work-dir "w$jobs" \
    --output "out$jobs.tar.gz" -- "$py" step.py '{batch}')
  wall[$jobs]=$(echo "$(date +%s.%N) - $start" | bc -l)
  log="$work/w$jobs/minrepro.log"
  search_end=$(echo "$(phase original "$log") + $(phase search "$log")" | bc -l)
  after=$(echo "${wall[$jobs]} - $search_end" | bc -l)
  printf -- "-j%s: %.1f s wall; %s; search %.1f s, fixed cost after it %.1f s (%.2f of the search)\n" "$jobs" \
    "${wall[$jobs]}" "$(grep -o "in [0-9]* trials; archive" "$log" | grep -o "[0-9]* trials")" \
    "$(phase search "$log")" "$after" "$(echo "$after / $(phase search "$log")" | bc -l)"
  grep "time: " "$log" | sed 's/^\[ *[0-9.]*s\] time: /    /'
done
printf -- "-j2 / -j1: %.2f\n" "$(echo "${wall[2]} / ${wall[1]}" | bc -l)"
if [ "$cvise_too" == yes ] && command -v cvise >/dev/null; then
  mkdir "$work/cvise"
  seq 0 $((n - 1)) > "$work/cvise/samples.txt"
  start=$(date +%s.%N)
  (cd "$work/cvise" && BENCH_PY="$py" BENCH_DIR="$work" BENCH_FULL="$work/batch.pt" \
    cvise --n 2 --not-c --tidy "$here/fixed_cost/cvise_test.sh" samples.txt > cvise.log 2>&1)
  cv=$(echo "$(date +%s.%N) - $start" | bc -l)
  printf "C-Vise -n 2: %.1f s wall, kept positions: %s; C-Vise / minrepro -j2: %.1f\n" "$cv" \
    "$(tr '\n' ' ' < "$work/cvise/samples.txt")" "$(echo "$cv / ${wall[2]}" | bc -l)"
fi
