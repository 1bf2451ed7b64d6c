"""minrepro's op recorder, loaded in every Python process of one run.

minrepro puts this directory first on PYTHONPATH and sets MINREPRO_OP_RECORD
for the run that locates the failing operator (engine/archive/op_repro.h);
Python imports the first sitecustomize it finds, so this one then runs the
one it shadows, if any, as Python would have. Without MINREPRO_OP_RECORD it
does nothing else. The recorder starts when the program imports torch.
"""
import importlib.util
import os
import sys

_here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))


def _run_shadowed_sitecustomize():
    """The sitecustomize Python would have imported without this directory."""
    for entry in sys.path:
        if not entry or os.path.realpath(entry) == _here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate) and os.path.realpath(os.path.dirname(candidate)) != _here:
            spec = importlib.util.spec_from_file_location("sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = module
            spec.loader.exec_module(module)
            return


if not getattr(sys, "_minrepro_op_recorder", False):
    sys._minrepro_op_recorder = True
    try:
        _run_shadowed_sitecustomize()
    finally:
        if os.environ.get("MINREPRO_OP_RECORD"):
            sys.path.insert(0, _here)
            try:
                import minrepro_op
                minrepro_op.install_on_torch_import()
            finally:
                sys.path.remove(_here)
