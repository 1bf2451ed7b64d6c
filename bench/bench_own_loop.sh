#!/usr/bin/env bash
# A user's own loop, end to end as a new user runs it (#28): the tagger of
# tests/fixtures/own_loop (forward(tokens, lengths), a padded batch with
# lengths, ids and ignored tags, weights loaded beside the step script),
# N samples (256 by default) with one token past the embedding table, and
# no case.yaml: `minrepro shrink --batch saved.pt -- python step.py {batch}`.
# Prints what the user typed and wrote, the time to the archive, the op
# step's and the self-check's shares (from the log's clock), the trials,
# minrepro's peak memory, and whether the archive runs alone.
# Usage: bench/bench_own_loop.sh [BUILD_DIR] [N]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
n="${2:-256}"
python="${MINREPRO_PYTHON:-$(pwd)/.venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp tests/fixtures/own_loop/{tagger.py,step.py,make_batch.py} "$work/"
(cd "$work" && "$python" make_batch.py "$n")
minrepro="$(pwd)/$build/minrepro"
start=$(date +%s.%N)
(cd "$work" && /usr/bin/time -f "%M" -o "$work/peak-kb" "$minrepro" shrink --batch saved.pt -- "$python" step.py '{batch}' \
  > "$work/out.txt" 2>&1) || { cat "$work/out.txt"; exit 1; }
end=$(date +%s.%N)
log="$work/minrepro-work/minrepro.log"
at() { grep -m1 "$1" "$log" | sed -E 's/^\[ *([0-9.]+)s\].*/\1/'; }
total=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
op_from=$(at "locating the failing operator call"); op_to=$(at "op-level reproducer:")
check_from=$(at "checking the archive on its own"); check_to=$(at "self-check:")
echo "own loop, $n samples (one bad token), PyTorch $("$python" -c 'import torch; print(torch.__version__)')"
echo "user-visible steps: 1 command (minrepro shrink --batch saved.pt -- python step.py {batch}); lines written by hand: 0"
echo "time to the archive: ${total} s (wall, whole process)"
awk -v a="$op_from" -v b="$op_to" -v t="$total" 'BEGIN { printf "op step: %.1f s (%.0f%% of the run)\n", b - a, 100 * (b - a) / t }'
awk -v a="$check_from" -v b="$check_to" -v t="$total" 'BEGIN { printf "self-check: %.1f s (%.0f%% of the run)\n", b - a, 100 * (b - a) / t }'
grep -m1 "^minrepro: reduced " "$work/out.txt"
echo "minrepro's peak RSS: $(( $(cat "$work/peak-kb") / 1024 )) MB"
mkdir "$work/alone" && tar xzf "$work/repro.tar.gz" -C "$work/alone"
if (cd "$work/alone" && env -i PATH=/usr/bin:/bin "$python" repro.py >/dev/null 2>&1); then
  echo "archive alone: PASSED (it should fail)"; exit 1
fi
echo "archive alone: fails as recorded ($(cd "$work/alone" && "$python" repro.py 2>&1 | tail -1))"
