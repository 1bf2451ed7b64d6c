#!/usr/bin/env bash
# Fresh Debian 12 to a reproducer: install, build, generate the bundled
# example (configs/examples/class4) and shrink it to repro.tar.gz.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
/usr/bin/python3 configs/examples/make_examples.py
build/minrepro shrink --config configs/examples/class4/case.yaml
echo
echo "Archive: configs/examples/class4/repro.tar.gz (extract it and run: /usr/bin/python3 repro.py)"
