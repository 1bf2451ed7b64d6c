"""Runs tests/capture/toplevel_loop.py as a Jupyter notebook cell runs: its
text compiled under a cell's name (<ipython-input-...>) and kept in
linecache, executed in a __main__ namespace without __file__, as IPython's
kernel does. Capture must find the step, the model's class and their source
through linecache alone.

Usage: python notebook_cell.py CASE_DIR"""
import linecache
import os
import sys
import types

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "toplevel_loop.py")) as f:
    text = f.read()
cell = "<ipython-input-3-5e2a1c0d9f4b>"
linecache.cache[cell] = (len(text), None, text.splitlines(True), cell)
main = types.ModuleType("__main__")  # no __file__: a notebook's
sys.modules["__main__"] = main
sys.argv = ["ipykernel_launcher.py", sys.argv[1]]
exec(compile(text, cell, "exec"), vars(main))
