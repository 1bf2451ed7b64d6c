#!/usr/bin/env bash
# Fresh Debian 12 to a green test suite, on both torches minrepro supports:
#  1. build/ against PyTorch 2.13 from pip (.venv/, the default; or the torch
#     MINREPRO_PYTHON names) and the whole suite, the Slurm tests on the
#     one-node test cluster;
#  2. minrepro's programs in build-debian/ against Debian's 1.13, and the
#     end-to-end tests where the torch's own code decides (ctest label
#     second-torch: the real binary on real cases, tests/CMakeLists.txt) run
#     on them with Debian's Python, unless MINREPRO_SECOND_TORCH=0;
#  3. the fuzz targets for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# The Slurm tests (tests/slurm_test.cc) run on the one-node test cluster.
# CI (CI=true, root) must run them: a cluster that cannot start fails the
# run. Elsewhere it is started when we are root; without it they skip. A
# cluster this script started is stopped on exit, one already up is left.
if { [ "${CI:-}" = "true" ] || [ "$(id -u)" -eq 0 ]; } && ! scripts/slurm-up.sh --running; then
  trap 'scripts/slurm-down.sh' EXIT
  scripts/slurm-up.sh
fi
ctest --test-dir "${MINREPRO_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
# The second torch: its programs only, built into build-debian/, run by the
# first build's test binary with that torch's Python (MINREPRO_TEST_PROGRAMS,
# tests/test_util.h): the tests are the same code whichever torch the programs
# are built against, so they are not compiled twice.
if [ "${MINREPRO_SECOND_TORCH:-1}" != 0 ]; then
  MINREPRO_TORCH=debian MINREPRO_PYTHON="" MINREPRO_BUILD_DIR=build-debian \
    MINREPRO_CMAKE_ARGS="-DMINREPRO_BUILD_BENCH=OFF" \
    MINREPRO_BUILD_TARGETS="minrepro minrepro-trial minrepro_capture_train_loop" scripts/build.sh
  MINREPRO_PYTHON=/usr/bin/python3 MINREPRO_TEST_PROGRAMS="$PWD/build-debian" \
    ctest --test-dir "${MINREPRO_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" -L second-torch
fi
# The LibTorch-free tests under AddressSanitizer and UndefinedBehaviorSanitizer,
# and the parsers that read what users and strangers write fuzzed under them
# (tests/fuzz/), bounded: MINREPRO_FUZZ_SECONDS per target (12 by default,
# which keeps CI's whole run, both torches included, within its time;
# scripts/fuzz.sh SECONDS fuzzes longer; 0 skips both).
fuzz_seconds="${MINREPRO_FUZZ_SECONDS:-12}"
if [ "$fuzz_seconds" -gt 0 ]; then
  scripts/fuzz.sh "$fuzz_seconds"
fi
