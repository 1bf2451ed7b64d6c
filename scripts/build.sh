#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds into
# $MINREPRO_BUILD_DIR (build/ by default) against the torch that
# scripts/torch-env.sh picks: PyTorch 2.13 from pip in .venv/ unless
# MINREPRO_TORCH=debian or MINREPRO_PYTHON=/path/to/python say otherwise
# (docs/guide.md, "Which torch").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
source scripts/torch-env.sh
scripts/install-python-capture.sh   # import minrepro_capture (harness/python)
# ccache, when present, compiles a file once for all build directories:
# what neither includes LibTorch nor is compiled with a path in the build
# directory (the base and reducer libraries among them) comes out the same
# for either torch, so run-tests.sh's second build takes it from the first.
# The build directory is left out of the hash (CCACHE_NOHASHDIR: only the
# debug info's compilation directory names it). No CCACHE_BASEDIR: it would
# make __FILE__ relative, and capture reads its caller's source path.
launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER=)  # none, also in a build configured with one
if command -v ccache >/dev/null; then
  export CCACHE_NOHASHDIR=true
  # The harness precompiles LibTorch's headers (CMakeLists.txt): ccache caches its files only with these.
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# MINREPRO_CMAKE_ARGS: more -D options (run-tests.sh's second build leaves out the benchmarks).
# shellcheck disable=SC2086
cmake -S . -B "$MINREPRO_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINREPRO_PYTHON="$MINREPRO_PYTHON" \
  "${launcher[@]}" ${MINREPRO_CMAKE_ARGS:-} >/dev/null
# MINREPRO_BUILD_TARGETS: only these targets (run-tests.sh's second build: the programs).
# shellcheck disable=SC2086
cmake --build "$MINREPRO_BUILD_DIR" -j "$(nproc)" ${MINREPRO_BUILD_TARGETS:+--target $MINREPRO_BUILD_TARGETS}
