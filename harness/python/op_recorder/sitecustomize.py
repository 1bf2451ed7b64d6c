"""minrepro's op recorder, loaded in every Python process of one run.

minrepro puts this directory first on PYTHONPATH and sets MINREPRO_OP_RECORD
for the run that locates the failing operator (engine/archive/op_repro.h);
Python imports the first sitecustomize it finds, so this one then runs the
one it shadows, if any, as Python would have. Without MINREPRO_OP_RECORD it
does nothing else.
"""
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _run_shadowed_sitecustomize():
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == _here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_minrepro_shadowed_sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


try:
    _run_shadowed_sitecustomize()
finally:
    if os.environ.get("MINREPRO_OP_RECORD"):
        sys.path.insert(0, _here)
        try:
            import minrepro_op
            minrepro_op.install()
        finally:
            sys.path.remove(_here)
