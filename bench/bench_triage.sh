#!/usr/bin/env bash
# minrepro triage on a large multi-rank log: LINES progress lines of RANKS
# ranks ("[rank0]: epoch 3 step ...", two by default), then the real torchrun log of
# tests/fixtures/logs/torch213/torchrun_ranks_raise.txt (rank 1 raises, rank 0
# times out). Whole-process wall time and peak memory (GNU time), one run.
# Usage: bench/bench_triage.sh [BUILD_DIR] [LINES] [RANKS]   (3000000 lines, 2 ranks)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
# The Python whose torch the build is against makes the cases and runs the archives.
py=$("$build/minrepro" --version | sed -n 's/^PyTorch from: //p')
lines=${2:-3000000}
ranks=${3:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" - "$work/train.log" "$lines" "$ranks" "$here/../tests/fixtures/logs/torch213/torchrun_ranks_raise.txt" <<'P'
import sys
path, lines, ranks, tail = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, "w") as f:
    for i in range(lines):
        f.write("[rank%d]: epoch 3 step %d loss 0.%04d lr 1e-4 grad_norm 1.23 throughput 1234.5 samples/s\n"
                % (i % ranks, i, i % 10000))
    f.write(open(tail).read())
P
size=$(du -m "$work/train.log" | cut -f1)
/usr/bin/time -f "%e %M" -o "$work/time" "$build/minrepro" triage "$work/train.log" > "$work/out"
read -r seconds kb < "$work/time"
echo "log: $lines progress lines of $ranks ranks + a torchrun log, $size MB"
echo "first error: $(grep '^first error' "$work/out" | sed 's/.*train.log://')"
echo "in: $(grep '^in:' "$work/out" | sed 's/in: *//')"
echo "wall: $seconds s, peak memory: $((kb / 1024)) MB"
