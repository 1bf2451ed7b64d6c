#!/usr/bin/env bash
# The LibTorch boundary, checked on what was compiled: the static libraries
# given (minrepro_core, _reducers, _engine, _commands) must hold no symbol
# of LibTorch's namespaces (at::, c10::, torch::, caffe2::), defined or
# referenced. Run after each of them is built (CMakeLists.txt), so a LibTorch
# call outside harness/ fails the build even where LibTorch's headers sit in
# the system include directory (Debian's libtorch-dev) and the include path
# alone cannot refuse them.
set -u
status=0
for library in "$@"; do
  hits=$(nm -C "$library" 2>/dev/null | grep -E '(^|[ (<,*&])(at|c10|torch|caffe2)::' | head -5 | cut -c1-200)
  if [ -n "$hits" ]; then
    echo "error: $(basename "$library") uses LibTorch; only harness/ may (give the engine a LibTorch-free header there):" >&2
    echo "$hits" | sed 's/^/  /' >&2
    status=1
  fi
done
exit "$status"
