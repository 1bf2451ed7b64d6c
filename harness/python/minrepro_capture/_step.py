"""The step itself as the trial: what captured_step.py needs to run it again.

A decorated step function is found again by its module and qualified name
and called with the arguments it had; a `with capture(...)` block's body is
read from its source file (the innermost `with` around the failing line
whose expression calls capture) and run with the variables it used. Either
way the batch the step was given is replaced by the trial's batch, and
everything else it used (model, optimizer, config objects) is saved once,
in one pickle so that shared objects stay shared (the optimizer's
parameters are the model's). The random number generators are recorded
when the step starts, so that a step with dropout draws the same numbers
again on the same batch.

When the step cannot be saved (a closure, an object pickle refuses, a loop
at a script's top level that importing would run again) StepNotSaved says
which and what to do; capture then falls back to the model slice."""
import ast
import inspect
import json
import os
import random
import shutil
import sys
import textwrap
import types

import torch

STEP_FILES = ("captured_step.py", "step.json", "step_state.pt")


class StepNotSaved(Exception):
    pass


def rng_snapshot():
    """The random generators' states, taken when a step starts (cheap: a few KB)."""
    numpy = sys.modules.get("numpy")
    cuda = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        cuda = torch.cuda.get_rng_state_all()
    # numpy's state as plain Python values: its array would pickle as numpy
    # internals that differ between numpy 1 and 2.
    numpy_state = None
    if numpy is not None:
        name, keys, position, has_gauss, gauss = numpy.random.get_state()
        numpy_state = (str(name), [int(k) for k in keys], int(position), int(has_gauss), float(gauss))
    return {"torch": torch.get_rng_state(), "random": random.getstate(), "numpy": numpy_state, "cuda": cuda}


def batch_layout(batch, keys, devices):
    """How the trial rebuilds the batch from batch.pt: keys in order, each
    key's device, and the kind of container the step was given."""
    kind = "dict" if isinstance(batch, dict) else "tensor" if isinstance(batch, torch.Tensor) \
        else "tuple" if isinstance(batch, tuple) else "list"
    return {"kind": kind, "keys": list(keys), "devices": dict(devices)}


class StepRecord:
    """What step.json and step_state.pt hold: `meta` is JSON, `objects` is pickled."""

    def __init__(self, kind, module_name, user_file):
        self.meta = {"kind": kind, "module": module_name, "argv": list(sys.argv[1:])}
        self.objects = {}
        self.user_file = os.path.abspath(user_file)
        self.namespace = {}  # where branch paths resolve: parameters or variables, then module globals
        self.module_globals = {}
        self.set_first = set()  # block variables the body sets before it reads them

    def switchable(self, path):
        """True when `path` (name or name.attr...) names something the step can see."""
        root, *attrs = path.split(".")
        scope = self.namespace if root in self.namespace else self.module_globals
        if root not in scope:
            return False
        target = scope[root]
        for attr in attrs:
            if isinstance(target, dict) and attr in target:
                target = target[attr]
            elif hasattr(target, attr):
                target = getattr(target, attr)
            else:
                return False
        return True


def _module_file(module_name, fallback):
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None) or fallback
    if not path or not os.path.isfile(path):
        raise StepNotSaved("the step's module %s has no source file (an interactive session or a notebook): put "
                           "the step in a .py file" % module_name)
    return path


def function_record(fn, args, kwargs, batch_at, rng, others):
    if "<locals>" in fn.__qualname__:
        raise StepNotSaved("the step %s is defined inside another function, where an import cannot find it: "
                           "define it at module level" % fn.__qualname__)
    record = StepRecord("function", fn.__module__, _module_file(fn.__module__, inspect.getsourcefile(fn)))
    parameters = [name for name, p in inspect.signature(fn).parameters.items()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args = list(args)
    if isinstance(batch_at, int):
        args[batch_at] = None
    else:
        kwargs = dict(kwargs, **{batch_at: None})
    record.meta.update(qualname=fn.__qualname__, parameters=parameters, batch_at=batch_at)
    record.objects.update(args=args, kwargs=kwargs, rng=rng, others=others)
    record.namespace = dict(zip(parameters, args), **kwargs)
    record.module_globals = fn.__globals__
    return record


def _innermost_capture_block(tree, line):
    def calls_capture(expr):
        return any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) == "capture"
                   for n in ast.walk(expr))
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and node.body and node.body[0].lineno <= line <= node.body[-1].end_lineno \
                and any(calls_capture(item.context_expr) for item in node.items):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


def _names(body):
    """(names the block reads, names it sets, names it sets before it reads them)."""
    reads, stored, events, after = set(), set(), [], {}
    nodes = [n for stmt in body for n in ast.walk(stmt)]
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):  # the targets are set after the value is read
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                after.update((id(n), (node.end_lineno, node.end_col_offset)) for n in ast.walk(target))
    for node in nodes:
        if isinstance(node, ast.Name):
            sets = isinstance(node.ctx, ast.Store)
            reads.add(node.id)  # a name only set is dropped later: it is no local at entry
            if sets:
                stored.add(node.id)
            events.append((after.get(id(node), (node.lineno, node.col_offset)), node.id, sets))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            events.append(((node.lineno, node.col_offset - 1), node.target.id, False))  # `x += 1` reads x first
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, ast.Nonlocal):
            raise StepNotSaved("the capture block uses `nonlocal`, which a block run on its own cannot")
    first = {}
    for _, name, sets in sorted(events, key=lambda e: e[0]):
        first.setdefault(name, sets)
    return sorted(reads), sorted(stored), sorted(n for n, sets in first.items() if sets)


def block_source(lines, block, stored):
    """The block's body as a function, its lines where they are in the
    user's file (tracebacks name the user's lines): the `for` lets `break`
    and `continue` stand, `global` keeps what the body sets visible."""
    first, last = block.body[0].lineno, block.body[-1].end_lineno
    body = textwrap.indent(textwrap.dedent("".join(lines[first - 1:last])), " " * 8)
    header = ["def __minrepro_block__():"] + (["    global " + ", ".join(stored)] if stored else []) + \
             ["    for __minrepro_once__ in (0,):"]
    return "\n" * max(0, first - 1 - len(header)) + "\n".join(header) + "\n" + body


def block_record(frame, entry_locals, line, batch, batch_tensors, rng, others):
    """The record of the `with capture(...)` block around `line` of `frame`.
    The variables are taken as they were when the block was entered
    (`entry_locals`, a shallow copy): a block that rebinds `x = x.to(device)`
    before failing must start again from the batch's x."""
    module_name = frame.f_globals.get("__name__", "__main__")
    path = _module_file(module_name, frame.f_code.co_filename)
    if frame.f_code.co_name == "<module>":
        raise StepNotSaved("the capture block is at the top level of %s, which importing would run again: put "
                           "the loop in a function called under `if __name__ == \"__main__\":`"
                           % os.path.basename(path))
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    block = _innermost_capture_block(ast.parse("".join(lines)), line)
    if block is None:
        raise StepNotSaved("no `with ...capture(...)` block around line %d of %s" % (line, path))
    reads, stored, set_first = _names(block.body)
    source = block_source(lines, block, stored)
    compile(source, path, "exec")
    record = StepRecord("block", module_name, path)
    by_id = {id(t): key for key, t in batch_tensors.items()}
    variables, batch_variables, modules = {}, {}, {}
    for name in reads:
        if name not in entry_locals:
            continue  # a global or builtin (the import provides it), or a name the block sets first
        value = entry_locals[name]
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        elif value is batch:
            batch_variables[name] = None
        elif isinstance(value, torch.Tensor) and id(value) in by_id:
            batch_variables[name] = by_id[id(value)]
        else:
            variables[name] = value
    record.meta.update(source=source, first_line=block.body[0].lineno, batch_variables=batch_variables,
                       modules=modules)
    record.set_first = set(set_first) & set(variables)
    record.objects.update(variables=variables, rng=rng, others=others)
    record.namespace = dict(entry_locals)
    record.module_globals = frame.f_globals
    return record


def unsaved_names(objects):
    """Which of the pickled objects pickle refuses: name (or argument position) -> why."""
    import io
    refused = {}
    for group in ("args", "kwargs", "variables"):
        values = objects.get(group)
        items = enumerate(values) if isinstance(values, list) else (values or {}).items()
        for name, value in items:
            try:
                torch.save(value, io.BytesIO())
            except Exception as error:
                refused[name] = "%s: %s" % (type(error).__name__, str(error).splitlines()[0][:120])
    return refused


def write(record, out_dir, switches):
    """captured_step.py, step.json and step_state.pt in out_dir; raises
    StepNotSaved (leaving none of the three) when the objects cannot be saved.
    A block variable pickle refuses that the body sets before reading (an
    open file from the previous step's `with open(...) as f`) is left out."""
    record.meta["switches"] = list(switches)
    partial = os.path.join(out_dir, "step_state.pt.partial")
    try:
        _save(record.objects, partial)
    except Exception as error:
        refused = unsaved_names(record.objects)
        kept = {name: why for name, why in refused.items() if name not in record.set_first}
        if not refused or kept:
            which = "; ".join("%s (%s)" % item for item in kept.items())
            raise StepNotSaved("the step's objects could not be saved with torch.save (%s: %s)%s" % (
                type(error).__name__, str(error).splitlines()[0][:200],
                "; the ones pickle refuses: %s (define them at module level, or create them inside the step)"
                % which if which else ""))
        for name in refused:
            del record.objects["variables"][name]
        _save(record.objects, partial)
    os.replace(partial, os.path.join(out_dir, "step_state.pt"))
    with open(os.path.join(out_dir, "step.json"), "w") as f:
        json.dump(record.meta, f, indent=1)
    shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "captured_step.py"),
                    os.path.join(out_dir, "captured_step.py"))


def _save(objects, path):
    """torch.save, leaving no partial file when it fails."""
    try:
        torch.save(objects, path)
    except Exception:
        if os.path.exists(path):
            os.remove(path)
        raise
