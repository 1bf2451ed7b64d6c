#!/bin/sh
# The ctest fixture shared_test_data (tests/CMakeLists.txt): DEST made afresh
# for each ctest run, holding the cases each generator makes, under the name
# of the generator's directory (where tests/test_util.cc's makeCases looks).
#   shared_test_data.sh PYTHON SOURCE_DIR DEST GENERATOR...
# $MINREPRO_PYTHON, when set, is the Python instead (the second torch's run).
set -eu
python=${MINREPRO_PYTHON:-$1} source_dir=$2 dest=$3
shift 3
rm -rf "$dest"
mkdir -p "$dest"
for generator in "$@"; do
  "$python" "$source_dir/$generator" "$dest/$(basename "$(dirname "$generator")")" >/dev/null
done
