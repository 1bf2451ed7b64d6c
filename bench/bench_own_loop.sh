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

# The capture path (tests/capture/tagger_loop.py): the training loop wraps
# its step in `with minrepro_capture.capture(...)`, fails at step 3, and the
# case capture wrote is shrunk. Then what capture costs per step that does
# not fail: entering and leaving the block (a shallow copy of the caller's
# locals and the random generators' states), against a plain `with` of a
# no-op context, in one process.
mkdir "$work/capture"
cp tests/capture/tagger_loop.py "$work/capture/"
cap_start=$(date +%s.%N)
(cd "$work/capture" && PYTHONPATH="$(cd - >/dev/null; pwd)/harness/python" "$python" tagger_loop.py crash with \
  > capture.txt 2>&1) || true
grep -q "test run of the case: fails the same way" "$work/capture/capture.txt" || { cat "$work/capture/capture.txt"; exit 1; }
cap_mid=$(date +%s.%N)
(cd "$work/capture" && "$minrepro" shrink --config crash/case.yaml > shrink.txt 2>&1) || { cat "$work/capture/shrink.txt"; exit 1; }
cap_end=$(date +%s.%N)
awk -v a="$cap_start" -v b="$cap_mid" -v c="$cap_end" \
  'BEGIN { printf "capture path: training to the failure and the capture with its test run %.1f s; shrink %.1f s\n", b - a, c - b }'
grep -m1 "^minrepro: reduced " "$work/capture/shrink.txt"
PYTHONPATH="$(pwd)/harness/python" "$python" - <<'PY'
import contextlib, sys, time
import torch
import minrepro_capture

def loop(make, steps=20000):
    model, x = torch.nn.Linear(4, 4), torch.zeros(8, 4)
    batch = {"input": x}
    start = time.perf_counter()
    for step in range(steps):
        with make(step, batch):
            pass
    return (time.perf_counter() - start) / steps * 1e6

plain = loop(lambda step, batch: contextlib.nullcontext())
captured = loop(lambda step, batch: minrepro_capture.capture("unused", step=step, batch=batch))
print("capture per step that does not fail: %.1f us (a no-op context: %.1f us)" % (captured, plain))
PY
