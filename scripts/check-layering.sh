#!/usr/bin/env bash
# The structure the build cannot see, checked by the test suite:
#  1. only engine/commands/ includes a command header: the library below the
#     commands never reaches up into them;
#  2. no engine or reducer file includes LibTorch, or a harness header that
#     does (the build also refuses: only minrepro_harness has LibTorch's
#     include path; this says which file and why);
#  3. reducers include no engine header but the content hash: a pass knows
#     the case only through reducers/reducer.h.
# Exit 0 when all hold, 1 with one line per offending include.
set -u
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root" || exit 2
status=0
report() { echo "layering: $1"; status=1; }

while IFS= read -r hit; do
  report "$hit: a library file includes a command header (move what it needs below engine/commands/)"
done < <(grep -rnE '#include "engine/commands/' engine harness reducers --include='*.cc' --include='*.h' --include='*.c' |
         grep -v '^engine/commands/')

torch_headers='#include <(torch|ATen|c10)/|#include "harness/(batch_io|capture|contract_tensors)\.h"'
while IFS= read -r hit; do
  report "$hit: LibTorch outside harness/ (give the engine a LibTorch-free header in harness/ instead)"
done < <(grep -rnE "^\s*($torch_headers)" engine reducers --include='*.cc' --include='*.h')

while IFS= read -r hit; do
  report "$hit: a reducer includes the engine (reducers see the case through reducers/reducer.h)"
done < <(grep -rnE '#include "engine/' reducers | grep -v '"engine/content_hash.h"')

[ "$status" -eq 0 ] && echo "layering: ok"
exit "$status"
