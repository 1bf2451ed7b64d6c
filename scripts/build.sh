#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds into
# $MINREPRO_BUILD_DIR (build/ by default) against the torch that
# scripts/torch-env.sh picks: PyTorch 2.13 from pip in .venv/ unless
# MINREPRO_TORCH=debian or MINREPRO_PYTHON=/path/to/python say otherwise
# (README, "Which torch").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
source scripts/torch-env.sh
scripts/install-python-capture.sh   # import minrepro_capture (harness/python)
# MINREPRO_CMAKE_ARGS: more -D options (run-tests.sh's second build leaves out the benchmarks).
# shellcheck disable=SC2086
cmake -S . -B "$MINREPRO_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINREPRO_PYTHON="$MINREPRO_PYTHON" \
  ${MINREPRO_CMAKE_ARGS:-} >/dev/null
cmake --build "$MINREPRO_BUILD_DIR" -j "$(nproc)"
