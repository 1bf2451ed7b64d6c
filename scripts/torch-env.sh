# Sourced by the build and test scripts: which torch to build against.
#
#   MINREPRO_PYTHON=/path/to/python   that interpreter's torch (a venv's, conda's)
#   MINREPRO_TORCH=pip (the default)  PyTorch 2.13 from pip, in the venv .venv/
#                                     (made here when it is missing or lacks it)
#   MINREPRO_TORCH=debian             Debian's libtorch-dev and python3-torch 1.13
#
# Sets MINREPRO_PYTHON (exported, for CMake; empty for Debian's, whose
# LibTorch CMake finds on its own), TORCH_PYTHON (the interpreter that runs
# the trials and the generators) and MINREPRO_BUILD_DIR (default: build).
# Expects the caller to be at the repository's root, after install-deps.sh.

MINREPRO_TORCH_PIN="torch==2.13.0"
MINREPRO_BUILD_DIR="${MINREPRO_BUILD_DIR:-build}"

if [ -n "${MINREPRO_PYTHON:-}" ]; then
  TORCH_PYTHON="$MINREPRO_PYTHON"
else
  case "${MINREPRO_TORCH:-pip}" in
    pip)
      # Debian's Python 3.11 matches the wheel pip takes for torch 2.13.0;
      # numpy because users' torch has it (and 2.x imports it when present).
      if ! .venv/bin/python -c "import torch, numpy, sys; sys.exit(torch.__version__.split('+')[0] != '${MINREPRO_TORCH_PIN#torch==}')" 2>/dev/null; then
        echo "torch-env: installing $MINREPRO_TORCH_PIN and numpy into .venv/"
        /usr/bin/python3 -m venv .venv
        .venv/bin/python -m pip install --quiet "$MINREPRO_TORCH_PIN" numpy
      fi
      MINREPRO_PYTHON="$PWD/.venv/bin/python"
      TORCH_PYTHON="$MINREPRO_PYTHON"
      ;;
    debian)
      MINREPRO_PYTHON=""
      TORCH_PYTHON=/usr/bin/python3
      ;;
    *)
      echo "torch-env: MINREPRO_TORCH=${MINREPRO_TORCH} is neither 'pip' (PyTorch 2.13 in .venv/) nor 'debian' (Debian's 1.13);" \
           "or set MINREPRO_PYTHON=/path/to/python to use that interpreter's torch" >&2
      exit 2
      ;;
  esac
fi
export MINREPRO_PYTHON TORCH_PYTHON MINREPRO_BUILD_DIR
