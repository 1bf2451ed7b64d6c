"""The `minrepro` command of a `pip install .` of minrepro's sources.

The programs are native (C++ over LibTorch) and sit in bin/ beside this
file with the files they look for beside themselves; this command replaces
itself with the real `minrepro` (exec, not a child process), so that exit
statuses, signals and the process tree are the program's own."""
import os
import sys

BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def main():
    program = os.path.join(BIN, "minrepro")
    if not os.access(program, os.X_OK):
        sys.exit("minrepro: %s is missing: this installation is incomplete; reinstall with "
                 "`pip install --force-reinstall <minrepro's sources>`" % program)
    os.execv(program, [program] + sys.argv[1:])
