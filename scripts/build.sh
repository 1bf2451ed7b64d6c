#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-python-capture.sh   # import minrepro_capture (harness/python)
# MINREPRO_PYTHON=/path/to/python: build against that interpreter's torch
# (README, "Which torch"); unset: Debian's libtorch-dev and /usr/bin/python3.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo ${MINREPRO_PYTHON:+-DMINREPRO_PYTHON="$MINREPRO_PYTHON"} >/dev/null
cmake --build build -j "$(nproc)"
