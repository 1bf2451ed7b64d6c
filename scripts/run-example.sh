#!/usr/bin/env bash
# Fresh Debian 12 to a reproducer: install, build (against PyTorch 2.13 in
# .venv/ unless MINREPRO_TORCH or MINREPRO_PYTHON say otherwise), generate the
# bundled example (configs/examples/class4) with that torch and shrink it to
# repro.tar.gz.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
source scripts/torch-env.sh
"$TORCH_PYTHON" configs/examples/make_examples.py
"$MINREPRO_BUILD_DIR"/minrepro shrink --config configs/examples/class4/case.yaml
echo
echo "Archive: configs/examples/class4/repro.tar.gz (extract it and run: $TORCH_PYTHON repro.py)"
