#!/bin/sh
# The compiler and linker launcher of `pip install .` (CMakeLists.txt, when
# scikit-build-core builds): pip shows nothing of a build it runs but
# "still running...", and minrepro's build takes minutes. This says on the
# terminal which file it compiles or links, and every 30 seconds that it
# still does. Without a terminal (CI, a log) it only runs the command.
#   build-progress.sh COMMAND ARGS...
if ! (true > /dev/tty) 2>/dev/null; then
  exec "$@"
fi
what=""
for arg in "$@"; do
  case "$arg" in
    *.cc | *.c | *.cpp | *.cxx) what="compiling $(basename "$arg")" ;;
  esac
done
if [ -z "$what" ]; then
  for arg in "$@"; do previous_was_o=${is_o:-}; is_o=""; [ "$arg" = "-o" ] && is_o=1; [ -n "$previous_was_o" ] && what="linking $(basename "$arg")"; done
fi
[ -z "$what" ] && what="building"
start=$(date +%s)
echo "minrepro build: $what" > /dev/tty
(
  while sleep 30; do
    echo "minrepro build: still $what ($(( $(date +%s) - start )) s)" > /dev/tty
  done
) &
ticker=$!
"$@"
status=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
exit $status
