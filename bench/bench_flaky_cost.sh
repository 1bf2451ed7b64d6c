#!/usr/bin/env bash
# What flakiness handling costs on failures that are deterministic (#41):
# each case shrunk twice, with the default (flakiness charged only on
# evidence of it, core/flaky.h) and with `flaky: {enabled: false}`, trials
# counted exactly, the kept ids compared. The cases: every bundled example,
# the own loop (tests/fixtures/own_loop, started without a case.yaml), the
# fidelity cases and the batch layouts people bring (tests/fixtures/layouts,
# started without a case.yaml). A flaky case (the `flaky` example) is shown
# for its verdict, not held to the ratio. --no-op-repro and --no-self-check
# on both sides: the search and its confirmation, nothing after.
# Usage: bench/bench_flaky_cost.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
py=$("$build/minrepro" --version | sed -n 's/^PyTorch from: //p')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$here/../configs/examples/make_examples.py" "$work/examples" >/dev/null
"$py" "$here/../tests/fixtures/fidelity/make_cases.py" "$work/fidelity" >/dev/null
"$py" "$here/../tests/fixtures/layouts/make_layouts.py" "$work/layouts" >/dev/null
mkdir -p "$work/own_loop" && cp "$here"/../tests/fixtures/own_loop/*.py "$work/own_loop/"
(cd "$work/own_loop" && "$py" make_batch.py >/dev/null)
flags=(--no-op-repro --no-self-check --quiet)
# trials and kept ids of a finished run, from its log
result() { grep -o "reduced .* trials" "$1" | tail -1 | sed 's/reduced \([0-9]*\) -> [0-9]* samples (ids \(\[[^]]*\]\)) in \([0-9]*\) trials/\3 \2/'; }
verdict() { grep -o "flakiness: charged as [a-z]*" "$1" | tail -1 | sed 's/flakiness: charged as //'; }
echo "| case | default: trials, kept | flaky off: trials, kept | ratio | charged as |"
echo "|---|---|---|---|---|"
worst=0
row() {  # name, default log, off log
  read -r d_trials d_ids <<<"$(result "$2")"
  read -r o_trials o_ids <<<"$(result "$3")"
  ratio=$(echo "scale=2; $d_trials / $o_trials" | bc)
  same=$([ "$d_ids" == "$o_ids" ] && echo "" || echo " DIFFERENT SAMPLES")
  echo "| $1 | $d_trials, $d_ids | $o_trials, $o_ids | $ratio$same | $(verdict "$2") |"
  if [ "$(verdict "$2")" == deterministic ] && [ "$(echo "$ratio > $worst" | bc)" == 1 ]; then worst=$ratio; fi
}
# A case's own flaky section out (the default), or replaced by enabled: false.
without_flaky() { awk '/^flaky:/ { skip = 1; next } skip && /^[ \t]/ { next } { skip = 0; print }' "$1"; }
for case_yaml in "$work"/examples/*/case.yaml "$work"/fidelity/*/case.yaml; do
  dir=$(dirname "$case_yaml")
  name=$(basename "$(dirname "$dir")")/$(basename "$dir")
  without_flaky "$case_yaml" >"$dir/case-default.yaml"
  cp "$dir/case-default.yaml" "$dir/case-off.yaml"
  printf "flaky: {enabled: false}\n" >>"$dir/case-off.yaml"
  "$build/minrepro" shrink --config "$dir/case-default.yaml" "${flags[@]}" --work-dir "$dir/w-default" \
    --output "$dir/d.tar.gz" 2>/dev/null || true
  "$build/minrepro" shrink --config "$dir/case-off.yaml" "${flags[@]}" --work-dir "$dir/w-off" --output "$dir/o.tar.gz" \
    2>/dev/null || true
  row "$name" "$dir/w-default/minrepro.log" "$dir/w-off/minrepro.log"
done
# Without a case file: the inferred case, then the same with flakiness off.
zero_config() {  # name, directory, batch, step script
  (cd "$2" && "$build/minrepro" shrink --batch "$3" "${flags[@]}" --work-dir w-default --output d.tar.gz \
    -- "$py" "$4" '{batch}' 2>/dev/null) || true
  cp "$2/w-default/case.yaml" "$2/case-off.yaml"
  printf "flaky: {enabled: false}\n" >>"$2/case-off.yaml"
  (cd "$2" && "$build/minrepro" shrink --config case-off.yaml "${flags[@]}" --work-dir w-off --output o.tar.gz \
    2>/dev/null) || true
  row "$1" "$2/w-default/minrepro.log" "$2/w-off/minrepro.log"
}
zero_config own_loop "$work/own_loop" saved.pt step.py
for step in "$work"/layouts/*/step.py; do
  zero_config "layouts/$(basename "$(dirname "$step")")" "$(dirname "$step")" batch.pt step.py
done
echo
echo "largest ratio on a failure charged as deterministic: $worst"
