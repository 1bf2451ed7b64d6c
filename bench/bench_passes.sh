#!/usr/bin/env bash
# Trials per pass (exact) on the bundled examples whose trigger is a length,
# a layout, a dtype, a branch or one value: runs minrepro shrink on each and
# tabulates the "pass NAME: ... in N trials (M candidates rejected by
# invariants without a trial)" lines of its log, summed over rounds.
# Usage: bench/bench_passes.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
# The Python whose torch the build is against makes the cases and runs the archives.
py=$("$build/minrepro" --version | sed -n 's/^PyTorch from: //p')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$here/../configs/examples/make_examples.py" "$work" >/dev/null
echo "| example | samples | branches | lengths | values | trials in all | rejected by invariants | minimal case |"
echo "|---|---|---|---|---|---|---|---|"
for ex in class4 pair seqlen exactlen strided half augment; do
  "$build/minrepro" shrink --config "$work/$ex/case.yaml" --quiet --output "$work/$ex.tar.gz" --work-dir "$work/w-$ex"
  log="$work/w-$ex/minrepro.log"
  declare -A per=()
  for pass in samples branches lengths values; do
    per[$pass]=$(grep -o "pass $pass: .* in [0-9]* trials" "$log" | grep -o "[0-9]* trials$" |
                 grep -o "[0-9]*" | paste -sd+ - | bc || true)
    [ -n "${per[$pass]}" ] || per[$pass]="-"
  done
  total=$(grep -o "in [0-9]* trials; archive" "$log" | grep -o "[0-9]*")
  rejected=$(grep -o "([0-9]* candidates rejected" "$log" | grep -o "[0-9]*" | paste -sd+ - | bc)
  minimal=$(grep "\] pass [a-z]*:" "$log" | tail -1 | sed 's/.* -> //; s/ in [0-9]* trials.*//')
  echo "| $ex | ${per[samples]} | ${per[branches]} | ${per[lengths]} | ${per[values]} | $total | $rejected | $minimal |"
done
