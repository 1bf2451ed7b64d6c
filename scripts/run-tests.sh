#!/usr/bin/env bash
# Fresh Debian 12 to a green test suite: install, build, run ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
