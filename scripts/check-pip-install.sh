#!/usr/bin/env bash
# `pip install .` as a user runs it, checked end to end (tests/CMakeLists.txt
# runs this as the ctest test PipInstall):
#  1. a fresh venv at a temporary path, whose torch is the tests' (a .pth
#     naming the site directory that holds it, as a conda or venv user has
#     torch installed already), gets `pip install .` of these sources;
#  2. the `minrepro` on that venv's PATH shrinks the own-loop fixture
#     (tests/fixtures/own_loop: a tagger whose forward takes (tokens,
#     lengths)) with no case file, and says which torch it was built
#     against;
#  3. a configure that cannot find yaml-cpp names the Debian package to
#     install.
# The build directory is build-pip/ (incremental on a rerun); ccache, when
# present, reuses what build/ compiled (the build sets CCACHE_NOHASHDIR, as
# build.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
work="$(mktemp -d /tmp/minrepro-pip-XXXXXX)"
trap 'rm -rf "$work"' EXIT

"$MINREPRO_PYTHON" -m venv --without-pip "$work/venv"
torch_site="$("$MINREPRO_PYTHON" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
own_site="$("$work/venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
echo "$torch_site" > "$own_site/torch-of-the-user.pth"

# The build's own launcher (CMakeLists.txt, scripts/build-progress.sh) uses
# ccache when it is present, as a user's `pip install .` does. Built with
# build/'s compiler (pip names Python's, x86_64-linux-gnu-g++, which ccache
# tells from c++) and build type, not the user's Release, ccache gives it
# what build/ compiled instead of a second whole build.
CC=cc CXX=c++ "$work/venv/bin/python" -m pip install --quiet --config-settings=build-dir=build-pip \
  --config-settings=cmake.build-type=RelWithDebInfo . \
  > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; echo "check-pip-install: pip install . failed" >&2; exit 1; }

export PATH="$work/venv/bin:$PATH"
[ "$(command -v minrepro)" = "$work/venv/bin/minrepro" ] || { echo "check-pip-install: minrepro is not on the venv's PATH" >&2; exit 1; }
minrepro --version | grep -q "^PyTorch from: $work/venv/bin/python" \
  || { minrepro --version; echo "check-pip-install: not built against the venv's torch" >&2; exit 1; }
(cd / && "$work/venv/bin/python" -c 'import minrepro_capture')

mkdir "$work/user"
cp tests/fixtures/own_loop/*.py "$work/user/"
cd "$work/user"
python make_batch.py
minrepro shrink --batch saved.pt -- python step.py {batch} > shrink.log 2>&1 || { cat shrink.log; exit 1; }
grep -q "reduced 24 -> 1 samples (ids \[1017\])" shrink.log || { cat shrink.log; exit 1; }
cd - >/dev/null

# A missing system library is named with its Debian package.
if cmake -S . -B "$work/no-yaml" -DMINREPRO_PYTHON="$MINREPRO_PYTHON" -DMINREPRO_BUILD_TESTS=OFF \
     -DMINREPRO_BUILD_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_yaml-cpp=TRUE > "$work/cmake.log" 2>&1; then
  echo "check-pip-install: configure without yaml-cpp succeeded" >&2; exit 1
fi
grep -q "sudo apt-get install libyaml-cpp-dev" "$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
echo "check-pip-install: pip install . built against $("$work/venv/bin/python" -c 'import torch; print(torch.__version__)'), minrepro on the venv's PATH shrank the own-loop case; a missing library is named"
