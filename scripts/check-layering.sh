#!/usr/bin/env bash
# The structure the build cannot see, checked by the test suite:
#  1. the folder tree is the library graph: each library's sources (the
#     add_library lists of CMakeLists.txt) lie in its own folder, core/ for
#     minrepro_core, reducers/, harness/, engine/ and commands/ for the
#     others;
#  2. includes go down the layers only: core < reducers < harness < engine
#     < commands, without exception (reducers include core's content hash
#     alone: a pass knows the case only through reducers/reducer.h);
#  3. no core, reducer, engine or command file includes LibTorch, or a
#     harness header that does (the build also refuses: only
#     minrepro_harness has LibTorch's include path; this says which file and
#     why).
# Exit 0 when all hold, 1 with one line per offence.
set -u
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root" || exit 2
status=0
report() { echo "layering: $1"; status=1; }

# 1. Sources of each library, by the folder its name says.
while read -r library source; do
  case "$library" in
    minrepro_core) folder=core/ ;;
    minrepro_reducers) folder=reducers/ ;;
    minrepro_harness) folder=harness/ ;;
    minrepro_engine) folder=engine/ ;;
    minrepro_commands) folder=commands/ ;;
    *) continue ;;
  esac
  [[ "$source" == "$folder"* ]] || report "$source is in $library, whose folder is $folder (move the file or the library)"
done < <(awk '/^add_library\(/ { lib = $1; sub(/add_library\(/, "", lib); inlist = 1; next }
              inlist && /^\)/ { inlist = 0 }
              inlist && $1 ~ /\.(cc|c)$/ { print lib, $1 }' CMakeLists.txt)
for folder in core reducers harness engine commands; do
  [ -d "$folder" ] || report "$folder/ is missing"
done

# 2. Includes only downwards.
layer() {
  case "$1" in core/*) echo 0 ;; reducers/*) echo 1 ;; harness/*) echo 2 ;; engine/*) echo 3 ;; commands/*) echo 4 ;;
    *) echo -1 ;; esac
}
while IFS=: read -r file line text; do
  target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$text")
  from=$(layer "$file") to=$(layer "$target")
  [ "$to" -lt 0 ] && continue
  if [ "$to" -gt "$from" ]; then
    report "$file:$line includes $target, a layer above it (move what it needs down, or the file up)"
  fi
  if [ "$from" -eq 1 ] && [ "$to" -eq 0 ] && [ "$target" != core/content_hash.h ]; then
    report "$file:$line: a reducer includes $target (reducers see the case through reducers/reducer.h)"
  fi
done < <(grep -rnE '^\s*#include "' core reducers harness engine commands --include='*.cc' --include='*.h' \
           --include='*.c' --include='*.def')

# 3. LibTorch in harness/ only.
torch_headers='#include <(torch|ATen|c10)/|#include "harness/(batch_io|capture|contract_tensors|shared_storage)\.h"'
while IFS= read -r hit; do
  report "$hit: LibTorch outside harness/ (give the engine a LibTorch-free header in harness/ instead)"
done < <(grep -rnE "^\s*($torch_headers)" core reducers engine commands --include='*.cc' --include='*.h')

[ "$status" -eq 0 ] && echo "layering: ok"
exit "$status"
