#!/usr/bin/env bash
# Archives that reproduce on their own: minrepro shrink on every bundled
# example, every fidelity case (tests/fixtures/fidelity: files beside the
# script, a SIGSEGV, views into a shared storage, a failure that forked
# trials hide, an mp.spawn job) and every op case (tests/fixtures/op_cases:
# bmm on bool, a CTC read out of bounds, a view in backward, a NaN the step
# checks itself) and, on PyTorch 2.x, the torch2 cases (DataLoader workers
# sharing tensors, a torch.compile bounds check) and the shared-buffer views
# case (a model reading the whole storage behind its input), then, independently of shrink's own self-check, the archive
# extracted into an empty directory and run there as a plain
# `python repro.py` with the build's Python (its exit as the shell sees it) and by
# `minrepro verify --runs 3`. Whole processes, no fork server in the check.
# The op step's outcome (engine/op_step/op_step.h) beside it: the call kept
# in op/repro_op.py, its runs and reduction trials, and the exit of a plain
# `python3 op/repro_op.py` in the empty directory; or why none was kept.
# Usage: bench/bench_fidelity.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
# The Python whose torch the build is against makes the cases and runs the archives.
py=$("$build/minrepro" --version | sed -n 's/^PyTorch from: //p')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$here/../configs/examples/make_examples.py" "$work/examples" >/dev/null
"$py" "$here/../tests/fixtures/fidelity/make_cases.py" "$work/fidelity" >/dev/null
"$py" "$here/../tests/fixtures/op_cases/make_cases.py" "$work/op_cases" >/dev/null
# PyTorch 2.x as people run it (tests/fixtures/torch2): a DataLoader whose
# workers share tensors, and a torch.compile kernel's bounds check; then
# three views of one packed buffer read whole (any torch).
if "$py" -c 'import sys, torch; sys.exit(torch.__version__.startswith("1."))'; then
  for name in workers compile; do
    "$py" "$here/../tests/fixtures/torch2/make_${name}_case.py" "$work/torch2/$name" >/dev/null
  done
fi
"$py" "$here/../tests/fixtures/torch2/make_shared_views_case.py" "$work/torch2/shared_views" >/dev/null
shopt -s nullglob
echo "| case | shrink exit | kept ids | trials | self-check | plain repro.py exit | verify | op step | op runs + reduction trials | plain repro_op.py exit |"
echo "|---|---|---|---|---|---|---|---|---|---|"
alone=0 total=0 op_made=0
for case_yaml in "$work"/examples/*/case.yaml "$work"/fidelity/*/case.yaml "$work"/op_cases/*/case.yaml \
                 "$work"/torch2/*/case.yaml; do
  dir=$(dirname "$case_yaml")
  name=$(basename "$(dirname "$dir")")/$(basename "$dir")
  out="$work/out/$(basename "$dir")-$(basename "$(dirname "$dir")")"
  mkdir -p "$out"
  status=0
  "$build/minrepro" shrink --config "$case_yaml" --output "$out/repro.tar.gz" --work-dir "$out/work" \
    >"$out/log" 2>&1 || status=$?
  ids=$(grep -o "samples (ids \[[^]]*\])" "$out/log" | tail -1 | sed 's/samples (ids //; s/)$//')
  trials=$(grep -o "in [0-9]* trials; archive" "$out/log" | grep -o "[0-9]*" || echo "-")
  check=$(grep -o "self-check: the archive [A-Za-z ]* in [0-9]* of [0-9]* runs" "$out/log" | sed 's/self-check: the archive //')
  mkdir -p "$out/empty"
  tar xzf "$out/repro.tar.gz" -C "$out/empty"
  # The shell's own "Segmentation fault" line goes to /dev/null with the rest.
  repro=$( (cd / && ulimit -c 0 && "$py" "$out/empty/repro.py" >/dev/null 2>&1); echo $? ) 2>/dev/null
  verify=$("$build/minrepro" verify "$out/repro.tar.gz" --runs 3 2>&1 | grep -o "reproduced in [0-9]* of [0-9]*" || true)
  op=$(grep -o "op-level reproducer: .*" "$out/log" | sed 's/op-level reproducer: //; s/op\/repro_op.py calls //; s/ alone and failed alone like the case in .*//' | cut -c1-160)
  op_cost=$(grep -o "Op step (the failing operator call alone): .*" "$out/empty/REPORT.md" | grep -o "[0-9]* runs.*, [0-9]* trials" | sed 's/ runs of repro.py and repro_op.py,/ +/; s/ trials//')
  op_exit=-
  [ -f "$out/empty/op/repro_op.py" ] && op_exit=$( (cd / && ulimit -c 0 && "$py" "$out/empty/op/repro_op.py" >/dev/null 2>&1); echo $? ) 2>/dev/null
  made=$([ -f "$out/empty/op/repro_op.py" ] && echo yes || echo no)
  [ "$made" = yes ] && op_made=$((op_made + 1))
  total=$((total + 1))
  # Alone: shrink's own check passed (exit 0) and an independent verify saw
  # the failure (every run for a deterministic case, as the self-check asks).
  if [ "$status" = 0 ] && [ -n "$verify" ] && [ "${verify#reproduced in 0 }" = "$verify" ]; then alone=$((alone + 1)); fi
  echo "| $name | $status | $ids | $trials | $check | $repro | ${verify:-error} | ${op:--} | ${op_cost:--} | $op_exit |"
done
echo
echo "archives that reproduced on their own (shrink's self-check passed and verify saw the failure): $alone of $total"
echo "archives with an op-level reproducer (op/repro_op.py): $op_made of $total"
