#!/usr/bin/env bash
# Installs minrepro's Python package (harness/python: minrepro_capture) into
# the Python minrepro is built against: $MINREPRO_PYTHON, else /usr/bin/python3.
# Editable (pip install -e), so the package stays the repository's code;
# --no-build-isolation uses that Python's own setuptools (nothing fetched).
# Debian marks its Python externally managed: there pip needs
# --break-system-packages, and root (sudo when not root). Removes the
# minrepro.pth that earlier versions wrote. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${MINREPRO_PYTHON:-/usr/bin/python3}
SUDO=""
flags=(--quiet --no-deps --no-build-isolation --editable ./harness/python)
if [ "$PY" = /usr/bin/python3 ]; then
  flags+=(--break-system-packages)
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  old="$("$PY" -c 'import site; print(site.getsitepackages()[0])')/minrepro.pth"
  [ -e "$old" ] && $SUDO rm -f "$old"
fi
$SUDO "$PY" -m pip install "${flags[@]}"
# Run from elsewhere: the import must come from the installation, not the cwd.
(cd / && "$PY" -c 'import minrepro_capture, os; print("install-python-capture: minrepro_capture from", os.path.dirname(minrepro_capture.__file__))')
