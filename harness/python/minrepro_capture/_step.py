"""The step itself as the trial: what captured_step.py needs to run it again.

A decorated step function is found again by its qualified name, and a
`with capture(...)` block's body is read from its source (the innermost
`with` around the failing line whose expression calls capture) and run with
the variables it used. A step defined in the script itself (`__main__`: a
loop at the script's top level, a notebook cell, a function beside it) is
taken by value (_by_value.py): the trial never imports the script again,
which would run its loop. A step in a module of its own is imported by
name. Either way the batch the step was given is replaced by the trial's
batch, and everything else it used (model, optimizer, config objects) is
saved once, in one pickle so that shared objects stay shared (the
optimizer's parameters are the model's). The random number generators are
recorded when the step starts, so that a step with dropout draws the same
numbers again on the same batch.

When the step cannot be saved (a closure, an object pickle refuses, source
that cannot be read) StepNotSaved says which and what to do; capture then
falls back to the model slice."""
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

from ._by_value import ByValue, StepNotSaved, source_lines

STEP_FILES = ("captured_step.py", "step.json", "step_state.pt")


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


class StepRecord:
    """What step.json and step_state.pt hold: `meta` is JSON, `objects` is pickled."""

    def __init__(self, kind, module_name, user_file):
        self.meta = {"kind": kind, "module": module_name, "argv": list(sys.argv[1:])}
        self.objects = {}
        self.user_file = user_file if user_file.startswith("<") else os.path.abspath(user_file)
        self.namespace = {}  # where branch paths resolve: parameters or variables, then module globals
        self.module_globals = {}
        self.set_first = set()  # block variables the body sets before it reads them
        self.by_value = None  # ByValue when the step is defined in __main__
        self.with_line = None  # a block's `with` line
        self.notes = []  # what the user should know of the saved step (CAPTURE-ERROR.txt)

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
        raise StepNotSaved("the step's module %s has no source file: put the step in a .py file" % module_name)
    return path


def _take_by_value(record, module_globals, names):
    """A step of __main__: what it reads from the script, by value."""
    record.by_value = ByValue(module_globals, "__main__")
    record.by_value.add(names)


def function_record(fn, args, kwargs, batch_at, rng, others):
    if "<locals>" in fn.__qualname__:
        raise StepNotSaved("the step %s is defined inside another function, where the trial cannot find it: "
                           "define it at module level" % fn.__qualname__)
    by_value = fn.__module__ == "__main__"
    user_file = inspect.getsourcefile(fn) or fn.__code__.co_filename if by_value \
        else _module_file(fn.__module__, inspect.getsourcefile(fn))
    record = StepRecord("function", fn.__module__, user_file)
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
    if by_value:
        _take_by_value(record, fn.__globals__, [fn.__qualname__.split(".")[0]])
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
    """(names the block reads, names it sets, names it sets before it reads
    them, of those the ones it surely sets first). Surely: by an assignment
    among the body's own statements, which runs whatever the branches do (a
    `logits = model(x)` whose stale value from the previous step need not be
    saved: 17 MB of a segmentation model's logits went into step_state.pt)."""
    reads, stored, events, after = set(), set(), [], {}
    nodes = [n for stmt in body for n in ast.walk(stmt)]
    sure = {id(n) for stmt in body if isinstance(stmt, ast.Assign) or
            (isinstance(stmt, ast.AnnAssign) and stmt.value is not None)
            for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
            for n in ast.walk(target)}
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
            events.append((after.get(id(node), (node.lineno, node.col_offset)), node.id, sets and id(node) in sure,
                           sets))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            events.append(((node.lineno, node.col_offset - 1), node.target.id, False, False))  # `x += 1` reads x first
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, ast.Nonlocal):
            raise StepNotSaved("the capture block uses `nonlocal`, which a block run on its own cannot")
    first = {}
    for _, name, surely, sets in sorted(events, key=lambda e: e[0]):
        first.setdefault(name, (sets, surely))
    return (sorted(reads), sorted(stored), sorted(n for n, (sets, _) in first.items() if sets),
            sorted(n for n, (_, surely) in first.items() if surely))


def block_source(lines, block, stored):
    """The block's body as a function, its lines where they are in the
    user's file (tracebacks name the user's lines): the `for` lets `break`
    and `continue` stand, `global` keeps what the body sets visible."""
    first, last = block.body[0].lineno, block.body[-1].end_lineno
    body = textwrap.indent(textwrap.dedent("".join(lines[first - 1:last])), " " * 8)
    header = ["def __minrepro_block__():"] + (["    global " + ", ".join(stored)] if stored else []) + \
             ["    for __minrepro_once__ in (0,):"]
    return "\n" * max(0, first - 1 - len(header)) + "\n".join(header) + "\n" + body


def block_reads(filename, with_line):
    """The names the body of the `with capture(...)` at `with_line` reads
    (what the entry of a top-level block takes a copy of), or None."""
    try:
        tree = ast.parse("".join(source_lines(filename)))
    except (StepNotSaved, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and node.lineno == with_line:
            reads, _, _, surely_set_first = _names(node.body)
            return sorted(set(reads) - set(surely_set_first))
    return None


def block_record(frame, entry_locals, line, batch, saved, rng, others):
    """The record of the `with capture(...)` block around `line` of `frame`.
    The variables are taken as they were when the block was entered
    (`entry_locals`, a shallow copy): a block that rebinds `x = x.to(device)`
    before failing must start again from the batch's x. A block at a
    script's top level (or in a notebook cell) reads globals: they were
    copied at its entry too."""
    module_name = frame.f_globals.get("__name__", "__main__")
    filename = frame.f_code.co_filename
    by_value = module_name == "__main__"
    path = filename if by_value else _module_file(module_name, filename)
    lines = source_lines(path)
    block = _innermost_capture_block(ast.parse("".join(lines)), line)
    if block is None:
        raise StepNotSaved("no `with ...capture(...)` block around line %d of %s" % (line, path))
    reads, stored, set_first, surely_set_first = _names(block.body)
    source = block_source(lines, block, stored)
    compile(source, path, "exec")
    record = StepRecord("block", module_name, path)
    variables, batch_variables, modules, from_script = {}, {}, {}, []
    for name in reads:
        if name in surely_set_first:
            continue  # its value at entry is never read: the previous step's, not this one's
        if name not in entry_locals:
            from_script.append(name)  # a global or builtin, or a name the block sets first
            continue
        value = entry_locals[name]
        part_path = saved.path_of(value)
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        elif value is batch:
            batch_variables[name] = None
        elif part_path is not None:
            batch_variables[name] = part_path
        elif by_value and frame.f_globals.get(name) is value and (inspect.isfunction(value) or inspect.isclass(value)):
            from_script.append(name)  # the script's own definition: by value, not pickled by reference
        else:
            variables[name] = value
            if saved.per_sample_lookalike(value):
                record.notes.append(
                    "`%s` holds %d entries, as the batch holds %d samples, but is not part of the batch given to "
                    "capture() (a copy, or made from it before the block): it is saved with the step's state, so "
                    "every cut of the batch meets all %d of them. Put in the batch given to capture() the object the "
                    "block reads, or make it inside the block from the batch" % (name, len(value), len(value),
                                                                                  len(value)))
    record.meta.update(source=source, first_line=block.body[0].lineno, batch_variables=batch_variables,
                       modules=modules)
    record.with_line = block.lineno  # the `with` statement's own line, which the user knows the block by
    record.set_first = set(set_first) & set(variables)
    record.objects.update(variables=variables, rng=rng, others=others)
    record.namespace = dict(entry_locals)
    record.module_globals = frame.f_globals
    if by_value:
        _take_by_value(record, frame.f_globals, [n for n in from_script if n not in set_first])
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
    if not record.user_file.startswith("<"):
        # Paths the step holds that lie beside the script (__file__, a HERE
        # the script computed, a data directory under it) are moved to the
        # script as the trial has it: an archive's copy, with the files the
        # trial read beside it (captured_step.relocated).
        record.meta["script_dir"] = os.path.dirname(record.user_file)
    if record.by_value is not None:
        record.by_value.add_classes_of(record.objects)
        record.by_value.add_classes_of(record.by_value.data)
        record.objects["globals"] = record.by_value.data
        record.meta["by_value"] = record.by_value.meta()
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
