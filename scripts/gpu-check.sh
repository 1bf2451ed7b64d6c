#!/usr/bin/env bash
# The GPU path end to end (docs/gpu-check.md): a device-side assert from a
# user's own training loop, captured, shrunk, verified and triaged on a real
# NVIDIA GPU, a flaky CUDA failure, two trials at once on one device, and
# the fork server facing a process that initialised CUDA. One script, sized
# to fit a short lease of a GPU machine with time to run it twice.
#
#   scripts/gpu-check.sh --fetch-debs DIR
#       here, with Debian's archive: the .deb files of the libraries minrepro
#       links (yaml-cpp, Boost.Program_options and Boost's headers,
#       libarchive, zlib; about 12 MB) into DIR, for a GPU machine without them.
#   scripts/gpu-check.sh [--python PY] [--debs DIR] [--build-dir DIR | --prebuilt DIR] [--out DIR] [--dry-run]
#       builds minrepro against PY's torch (the CUDA build there; default
#       $MINREPRO_PYTHON, else the first python3 on PATH that imports torch),
#       unpacking DIR's .deb files into a prefix when the libraries are
#       missing, then runs the checks and writes OUT/results.md (default
#       gpu-check-out/). --dry-run (also chosen, and said, when torch sees no
#       CUDA device) runs every step on the CPU up to the first CUDA call:
#       the build, the loop's capture, shrink, verify, triage and the op
#       reproducer on the CPU's form of the same failure (IndexError); the
#       CUDA-only checks are listed as not run. --prebuilt DIR uses the
#       minrepro already built in DIR (CI's dry run, on the test build).
# Exit status: 0 every check ran as expected, 1 a check did not, 2 bad usage.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python="${MINREPRO_PYTHON:-}" debs="" build="" out="$root/gpu-check-out" dry_run=no prebuilt=no
while [ $# -gt 0 ]; do
  case "$1" in
    --fetch-debs)
      mkdir -p "$2" && cd "$2" || exit 2
      exec apt-get download libyaml-cpp-dev libyaml-cpp0.7 libboost-program-options-dev \
        libboost-program-options1.74-dev libboost-program-options1.74.0 libboost1.74-dev libboost-dev \
        libarchive-dev libarchive13 zlib1g-dev libssl-dev libssl3 ;;
    --python) python="$2"; shift ;;
    --debs) debs=$(cd "$2" && pwd); shift ;;
    --build-dir) build="$2"; shift ;;
    --prebuilt) build="$2" prebuilt=yes; shift ;;
    --out) out="$2"; shift ;;
    --dry-run) dry_run=yes ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$python" ]; then
  for candidate in python3 python "$root/.venv/bin/python"; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then
      python=$(command -v "$candidate"); break
    fi
  done
fi
[ -n "$python" ] || { echo "gpu-check: no Python that imports torch: give one with --python" >&2; exit 2; }
case "$python" in /*) ;; *) python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")" ;; esac
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
results="$out/results.md" failures=0
cuda=$("$python" -c "import torch; print('yes' if torch.cuda.is_available() else 'no')" 2>/dev/null)
if [ "$cuda" != yes ] && [ "$dry_run" == no ]; then
  echo "gpu-check: torch at $python sees no CUDA device: running the dry run (every step on the CPU)" >&2
  dry_run=yes
fi
device=$([ "$dry_run" == yes ] && echo cpu || echo cuda)
build=${build:-$root/build-gpu-check}
mkdir -p "$build" && build=$(cd "$build" && pwd)

note() { echo "$*" | tee -a "$results"; }
# check NAME EXPECTED_STATUS COMMAND...: runs it, its output to OUT/NAME.log,
# and a line with its wall time in results.md.
check() {
  local name=$1 want=$2; shift 2
  local start=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local verdict="as expected"
  if [ "$want" != any ] && [ "$rc" != "$want" ]; then verdict="NOT as expected (wanted $want)"; failures=$((failures + 1)); fi
  note "- $name: exit $rc, $((SECONDS - start)) s, $verdict"
  return 0
}
field() { grep -m1 -o "$1" "$2" 2>/dev/null || echo "(not found)"; }

{
  echo "# GPU check, $(date -u +%F\ %H:%M) UTC"
  echo
  echo "- mode: $([ "$dry_run" == yes ] && echo "dry run on the CPU (no CUDA call made)" || echo "CUDA")"
  echo "- torch: $("$python" -c "import torch; print(torch.__version__, 'CUDA', torch.version.cuda)")  ($python)"
  [ "$dry_run" == no ] && echo "- device: $("$python" -c "import torch; print(torch.cuda.get_device_name(0))")"
  echo
} > "$results"

# --- the build ---------------------------------------------------------------
prefix_args=()
if [ -n "$debs" ] && ! [ -e /usr/include/yaml-cpp/yaml.h ]; then
  prefix="$work/prefix"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
  lib="$prefix/usr/lib/$(gcc -dumpmachine)"
  prefix_args=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DBOOST_ROOT="$prefix/usr" -DCMAKE_INCLUDE_PATH="$prefix/usr/include"
    -DCMAKE_LIBRARY_PATH="$lib")
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  note "- libraries: unpacked from $(ls "$debs"/*.deb | wc -l) .deb files of $debs"
fi
configure_and_build() {
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINREPRO_PYTHON="$python" \
    -DMINREPRO_BUILD_TESTS=OFF -DMINREPRO_BUILD_BENCH=OFF "${prefix_args[@]}" &&
    cmake --build "$build" -j "$(nproc)"
}
if [ "$prebuilt" == yes ]; then
  note "- build: the minrepro already built in $build"
else
  check build 0 configure_and_build
fi
minrepro="$build/minrepro"
[ -x "$minrepro" ] || { note "- no minrepro was built: see $out/build.log"; exit 1; }
export PYTHONPATH="$root/harness/python${PYTHONPATH:+:$PYTHONPATH}"  # minrepro_capture

# --- a device-side assert from the loop: capture, shrink, verify, triage -----
# On CUDA the captured process exits 87 after the assert (the context is
# poisoned); on the CPU the same bad token is an IndexError (exit 1).
mkdir -p "$work/assert" && cd "$work/assert" || exit 1
check capture "$([ "$device" == cuda ] && echo 87 || echo 1)" \
  "$python" "$root/scripts/gpu-check/tagger_loop.py" case --device "$device"
note "  - captured: $(field "wrote [^ ]*case.yaml ([^)]*)" "$out/capture.log"); backend: $(sed -n 's/^  backend: "\(.*\)"$/\1/p' case/case.yaml)"
check shrink 0 "$minrepro" shrink --config case/case.yaml --jobs 2 --trials-per-device 2 --output "$work/assert.tar.gz"
note "  - $(field "reduced [0-9]* -> [0-9]* samples (ids [^)]*) in [0-9]* trials" "$out/shrink.log")"
note "  - diagnostic variables: $(field "diagnostic variables for the trials: [^;]*" "$out/shrink.log")"
note "  - self-check: $(field "self-check: the archive [a-zA-Z ]* in [0-9]* of [0-9]* runs" "$out/shrink.log")"
note "  - $(field "op-level reproducer: [^(]*" "$out/shrink.log")"
check verify 0 "$minrepro" verify "$work/assert.tar.gz" --runs 3
check triage 0 "$minrepro" triage "$out/capture.log"
note "  - triage: $(grep -m3 -E "first error|kernel|\.cu:[0-9]+" "$out/triage.log" | tr '\n' ' ')"
mkdir -p "$work/alone" && tar xzf "$work/assert.tar.gz" -C "$work/alone"
if [ -f "$work/alone/op/repro_op.py" ]; then
  cd "$work/alone/op" || exit 1
  check op-on-"$device" 1 "$python" repro_op.py
  note "    $(tail -1 "$out/op-on-$device.log")"
  if [ "$device" == cuda ]; then
    sed -E "s/cuda(:[0-9]+)?/cpu/g" "$work/alone/op/repro_op.py" > "$work/alone/op/repro_op_cpu.py"
    check op-on-cpu any "$python" repro_op_cpu.py
    note "    $(tail -1 "$out/op-on-cpu.log")"
  fi
fi

# --- a flaky CUDA failure: a random augmentation no seed of minrepro reaches --
mkdir -p "$work/flaky" && cd "$work/flaky" || exit 1
check flaky-capture "$([ "$device" == cuda ] && echo 87 || echo 1)" \
  "$python" "$root/scripts/gpu-check/tagger_loop.py" case --device "$device" --flaky
if [ "$dry_run" == no ]; then
  check flaky-shrink 0 "$minrepro" shrink --config case/case.yaml --jobs 2 --trials-per-device 2 \
    --output "$work/flaky.tar.gz"
  note "  - $(field "reduced [0-9]* -> [0-9]* samples[^;]*" "$out/flaky-shrink.log"); $(field "failure rate[^;]*" "$out/flaky-shrink.log")"
  check flaky-verify any "$minrepro" verify "$work/flaky.tar.gz" --runs 10
  note "  - verify: $(tail -1 "$out/flaky-verify.log")"
else
  note "- flaky-shrink, flaky-verify: not run in the dry run (the failure's rate is CUDA's to show)"
fi

# --- the fork server never forks a process that initialised CUDA -------------
if [ "$dry_run" == no ]; then
  cd "$work/assert" || exit 1
  echo "import torch; torch.cuda.init()" > case/touch_cuda.py
  sed 's/^  timeout: 60$/  timeout: 60\n  preload: [touch_cuda]/' case/case.yaml > case/case-cuda-preload.yaml
  check fork-server-cuda 0 "$minrepro" shrink --config case/case-cuda-preload.yaml --max-trials 12 \
    --work-dir "$work/cuda-preload" --output "$work/cuda-preload.tar.gz" --no-op-repro
  note "  - $(field "trial processes: [^(]*([^)]*)" "$out/fork-server-cuda.log")"
  grep -qi "cuda" "$work/cuda-preload/fork-server.log" 2>/dev/null || { note "  - fork-server.log does not name CUDA"; failures=$((failures + 1)); }
else
  note "- fork-server-cuda: not run in the dry run (it needs a process that initialised CUDA)"
fi

note ""
note "$([ $failures -eq 0 ] && echo "every check ran as expected" || echo "$failures check(s) did not run as expected"); logs in $out"
[ $failures -eq 0 ]
