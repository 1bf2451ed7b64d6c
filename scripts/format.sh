#!/usr/bin/env bash
# The project's C and C++ style is .clang-format's (clang-format-14, from
# scripts/install-deps.sh): `scripts/format.sh` rewrites every tracked source
# in place, `scripts/format.sh --check` lists the files that differ (exit 1
# when any does). Test fixtures are left as written.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c' | grep -v '^tests/fixtures/')
if [ "${1:-}" = --check ]; then
  status=0
  for f in "${files[@]}"; do
    clang-format-14 --dry-run --Werror "$f" > /dev/null 2>&1 || { echo "format: $f differs"; status=1; }
  done
  exit "$status"
fi
clang-format-14 -i "${files[@]}"
