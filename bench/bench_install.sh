#!/usr/bin/env bash
# `pip install .` timed as a new user meets it: a fresh venv whose torch is
# the tests' (a .pth, as a user's environment has torch already), a build
# directory of its own, ccache off (a cold cache), on this machine's cores.
# Prints the wall time and the peak memory of the whole install, and the
# build's ten slowest steps (from ninja's log).
#   bench/bench_install.sh [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
work="$(mktemp -d /tmp/minrepro-install-XXXXXX)"
[ "${1:-}" = "--keep" ] || trap 'rm -rf "$work"' EXIT
"$MINREPRO_PYTHON" -m venv "$work/venv"
torch_site="$("$MINREPRO_PYTHON" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
own_site="$("$work/venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
echo "$torch_site" > "$own_site/torch-of-the-user.pth"
echo "bench_install: $(nproc) cores; pip install . into $work/venv (ccache off, build dir $work/build)"
export CCACHE_DISABLE=1
/usr/bin/time -f "bench_install: wall %e s, peak memory %M KB (largest process)" \
  "$work/venv/bin/python" -m pip install --quiet --config-settings=build-dir="$work/build" . 2>&1 | tail -3
echo "bench_install: slowest steps (s):"
awk 'NR > 1 { printf "  %6.1f %s\n", ($2 - $1) / 1000, $4 }' "$work/build/.ninja_log" | sort -rn | head -10
