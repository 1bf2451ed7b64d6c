#!/usr/bin/env bash
# Installs the Debian 12 packages minrepro needs to build, test and run.
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config
  ccache                              # the second torch's build reuses the torch-free objects (build.sh)
  libtorch-dev python3-torch          # LibTorch 1.13 (C++) and the same PyTorch for /usr/bin/python3
  python3-pip python3-setuptools python3-wheel  # pip install of minrepro_capture (harness/python/pyproject.toml)
  python3-venv                        # .venv/ with PyTorch 2.13 from pip (scripts/torch-env.sh)
  libboost-dev libboost-program-options-dev
  libyaml-cpp-dev libarchive-dev
  libssl-dev                          # HMAC-SHA256 sealing the archives this user makes (engine/archive/seal.h)
  zlib1g-dev                          # CRC-32 of the candidate files minrepro streams (harness/stored_zip.cc)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev         # the fuzz targets (tests/fuzz/: libFuzzer, ASan, UBSan)
  clang-format-14                     # scripts/format.sh: the style of .clang-format
  bubblewrap                          # verify/regress/compare --sandbox: an archive's code from elsewhere (core/process/sandbox.h)
  chromium                            # tests/report_html_e2e_test.cc renders REPORT.html headless (no console message, a screenshot)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
