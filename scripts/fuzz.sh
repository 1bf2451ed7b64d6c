#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz/, clang with libFuzzer, AddressSanitizer
# and UndefinedBehaviorSanitizer) and the LibTorch-free unit tests under the
# same sanitizers into build-fuzz/, runs those tests, then each target for SECONDS
# (default 60) on a corpus seeded from tests/fuzz/corpus/, the triage
# fixtures and a real archive. Exit 1 when a target crashes, leaks, hangs or
# trips a sanitizer; the input that did it is kept in build-fuzz/artifacts/.
# Needs clang-14 and libclang-rt-14-dev (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
cmake -S tests/fuzz -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 > /dev/null
cmake --build build-fuzz -j "$(nproc)"
# The unit tests that need no LibTorch, under the same sanitizers.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-fuzz/sanitized_tests --gtest_brief=1
mkdir -p build-fuzz/artifacts
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
# A real archive's shape for the extraction target: entries, a directory, a script.
mkdir -p "$seeds/tree/neighbours" build-fuzz/corpus/archive
printf 'raise SystemExit(1)\n' > "$seeds/tree/repro.py"
printf 'family: index-error\n' > "$seeds/tree/signature.txt"
printf 'x' > "$seeds/tree/neighbours/plus_one.pt"
tar czf build-fuzz/corpus/archive/seed.tar.gz -C "$seeds/tree" .
status=0
for target in case_config classify journal manifest archive; do
  corpus=build-fuzz/corpus/$target
  mkdir -p "$corpus"
  [ -d tests/fuzz/corpus/$target ] && cp -n tests/fuzz/corpus/$target/* "$corpus"/
  extra=()
  [ "$target" = classify ] && extra=(tests/fixtures/outputs tests/fixtures/logs/torch113 tests/fixtures/logs/torch213)
  echo "fuzz: $target for ${seconds} s"
  mkdir -p "$seeds/tmp-$target"
  if ! TMPDIR="$seeds/tmp-$target" build-fuzz/fuzz_$target -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/$target- "$corpus" "${extra[@]}" \
       > "build-fuzz/$target.log" 2>&1; then
    echo "fuzz: $target FAILED; the input is in build-fuzz/artifacts/, the log in build-fuzz/$target.log" >&2
    tail -40 "build-fuzz/$target.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_runs|cov:" "build-fuzz/$target.log" | tail -2 | sed 's/^/  /'
  fi
done
exit "$status"
