#!/usr/bin/env bash
# C-Vise's interestingness test: the positions in samples.txt still make the
# step fail the same way (the same first message), as minrepro's trials judge.
# BENCH_PY, BENCH_DIR and BENCH_FULL come from bench/bench_fixed_cost.sh.
"$BENCH_PY" "$BENCH_DIR/subset.py" "$BENCH_FULL" samples.txt batch.pt 2>/dev/null || exit 1
"$BENCH_PY" "$BENCH_DIR/step.py" batch.pt 2>&1 | grep -q "IndexError: Target 10 is out of bounds."
