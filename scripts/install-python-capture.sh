#!/usr/bin/env bash
# Makes `import minrepro_capture` work for /usr/bin/python3 (the Python with
# PyTorch): writes minrepro.pth, holding the absolute path of harness/python,
# into its site-packages directory. Safe to rerun; sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
dir="$("$PY" -c 'import site; print(site.getsitepackages()[0])')"
src="$(pwd)/harness/python"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO mkdir -p "$dir"
printf '%s\n' "$src" | $SUDO tee "$dir/minrepro.pth" >/dev/null
"$PY" -c 'import minrepro_capture' && echo "install-python-capture: $dir/minrepro.pth -> $src"
