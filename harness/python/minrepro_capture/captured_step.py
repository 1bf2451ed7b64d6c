"""minrepro's trial for a training step captured by minrepro_capture.

    python captured_step.py BATCH USER_FILE MODULE [--off BRANCH]...

Runs the user's own step on BATCH (the failing batch or a smaller one, in
the nesting of dicts, lists and tuples the step was given): the decorated
step function, called with the arguments it had at the failure, or the body
of the `with capture(...)` block, run with the variables it used. Those
objects (model, optimizer, arguments) and the random number generators'
states at the step's start were saved beside this file as step_state.pt
(step.json says which step it is and how the batch was laid out); the
batch's tensors take the place of the batch the step was given, on the
devices it had them (the CPU when that device is missing here), in the
named tuples and mappings it had.

A step defined in the user's script itself (MODULE __main__) is run by
value: step.json holds the source of the script's functions and classes
the step uses, which are defined here again (with USER_FILE and their own
line numbers, so tracebacks name the user's lines), beside the modules it
imported; the script is never run, nor imported. Any other step is imported
from USER_FILE as MODULE, never run as a script.
`minrepro_capture` is replaced by a stand-in while the step runs, so that
the trial neither captures again nor needs minrepro installed. --off NAME
switches one of the branches capture recorded off (it sets the named
variable or attribute to False).

Standard library and torch only: the archive runs where minrepro is not
installed."""
import ast
import functools
import importlib
import importlib.util
import json
import os
import pickle
import random
import sys
import textwrap
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP_ON_IMPORT = ("importing %s ran its training loop (a capture() block or a captured step ran during the "
                  "import): put the loop under `if __name__ == \"__main__\":` so that the step can be imported "
                  "without training")


class _Importing:
    user_file = None


class _NoCapture:
    """minrepro_capture.capture inside the trial: passes the step through."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        if _Importing.user_file:
            raise RuntimeError(LOOP_ON_IMPORT % _Importing.user_file)
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def step(*args, **kwargs):
            self.__enter__()
            return fn(*args, **kwargs)
        step.__wrapped_step__ = fn
        return step


def _stand_in_for_capture():
    module = types.ModuleType("minrepro_capture")
    module.capture = _NoCapture
    module.DEVICE_ASSERT_EXIT_CODE = 87
    module.last_capture = None
    module.is_device_assert = lambda exc: "device-side assert" in str(exc)
    sys.modules["minrepro_capture"] = module


def import_user_module(user_file, name, argv):
    """The module that defines the step, with sys.path and sys.argv as the
    captured run had them (a module that parses its arguments at import
    gets the original command line)."""
    user_file = os.path.abspath(user_file)
    sys.path.insert(0, os.path.dirname(user_file))
    saved_argv, sys.argv = sys.argv, [user_file] + list(argv)
    _Importing.user_file = os.path.basename(user_file)
    try:
        if name == "__main__":
            spec = importlib.util.spec_from_file_location("__minrepro_user_main__", user_file)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            return module
        root = user_file
        for _ in range(name.count(".") + 1 + (os.path.basename(user_file) == "__init__.py")):
            root = os.path.dirname(root)
        sys.path.insert(0, root)
        return importlib.import_module(name)
    finally:
        _Importing.user_file = None
        sys.argv = saved_argv


def build_by_value(step, user_file):
    """The script's namespace as far as the step uses it: modules imported
    again, names imported from modules, literals, then each definition in
    the script's order (its source compiled with its file and lines)."""
    by_value = step["by_value"]
    module = types.ModuleType("__main__")
    module.__file__ = os.path.abspath(user_file)
    names = vars(module)
    sys.path.insert(0, os.path.dirname(os.path.abspath(user_file)))  # `from tagger import Tagger` beside the script
    for alias, name in by_value["modules"].items():
        names[alias] = importlib.import_module(name)
    for alias, (name, qualname) in by_value["imports"].items():
        value = importlib.import_module(name)
        for part in qualname.split("."):
            value = getattr(value, part)
        names[alias] = value
    for name, text in by_value["constants"].items():
        names[name] = relocated(ast.literal_eval(text), step.get("script_dir"), os.path.dirname(module.__file__))
    for d in by_value["definitions"]:
        file = _script_named(d["file"], user_file)
        line, text = _definition_as_edited(d, file) if file == os.path.abspath(user_file) else (d["line"], d["source"])
        exec(compile("\n" * (line - 1) + text, file, "exec"), names)
    return module


# A fix is checked by editing the script (`minrepro verify --code DIR`
# puts the user's copy in the archive's place, or a maintainer edits the
# archive's): the step's source saved at capture would run the bug again
# ("still fails" for a good fix). Where the file no longer holds the saved
# source at its line, the file's own version of it runs: a definition by
# its name, the block as the `with ...capture(...)` nearest its old line.

def _source_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None


def _holds(lines, first, text):
    """Whether `lines` hold `text` from line `first` on (indentation aside;
    a line blank in `text`, a decorator left out, matches any)."""
    want = textwrap.dedent(text).splitlines()
    have = textwrap.dedent("".join(lines[first - 1:first - 1 + len(want)])).splitlines()
    return len(have) == len(want) and all(not w.strip() or w == h for w, h in zip(want, have))


def _parsed(lines):
    try:
        return ast.parse("".join(lines))
    except SyntaxError:
        return None


def _definition_as_edited(d, file):
    """(first line, source) of a definition the step uses, as `file` has it."""
    lines = _source_lines(file)
    tree = None if lines is None or _holds(lines, d["line"], d["source"]) else _parsed(lines)
    nodes = [n for n in (tree.body if tree else []) if getattr(n, "name", None) == d["name"]]
    if not nodes:
        return d["line"], d["source"]
    node = nodes[-1]
    first = min([node.lineno] + [x.lineno for x in node.decorator_list])
    text = lines[first - 1:node.end_lineno]
    saved = set(d["source"].splitlines())
    for x in node.decorator_list:  # capture's own decorator stays out, as at capture
        if not any(lines[i - 1].rstrip("\n") in saved for i in range(x.lineno, x.end_lineno + 1)):
            for i in range(x.lineno, x.end_lineno + 1):
                text[i - first] = "\n"
    if not _holds(lines, first, d["source"]):
        _say_edited("%s (line %d)" % (d["name"], node.lineno), file)
    return first, textwrap.dedent("".join(text))


def _block_as_edited(step, file):
    """The block's source as `file` has it: its saved wrapper (a function run
    once, captured_step's own lines) around the body the file holds now."""
    saved = step["source"].splitlines(keepends=True)
    start = next(i for i, l in enumerate(saved) if l.startswith("def __minrepro_block__"))
    loop = next(i for i, l in enumerate(saved) if l.startswith("    for __minrepro_once__"))
    lines = _source_lines(file)
    if lines is None or _holds(lines, step["first_line"], "".join(saved[loop + 1:])):
        return step["source"]
    tree = _parsed(lines)
    calls_capture = lambda e: any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None))
                                  == "capture" for n in ast.walk(e))
    blocks = [n for n in (ast.walk(tree) if tree else []) if isinstance(n, ast.With) and n.body and
              any(calls_capture(item.context_expr) for item in n.items)]
    if not blocks:
        return step["source"]
    block = min(blocks, key=lambda n: abs(n.body[0].lineno - step["first_line"]))
    first, last = block.body[0].lineno, block.body[-1].end_lineno
    body = textwrap.indent(textwrap.dedent("".join(lines[first - 1:last])), " " * 8)
    header = saved[start:loop + 1]
    if not _holds(lines, first, "".join(saved[loop + 1:])):
        _say_edited("the with block at line %d" % block.lineno, file)
    return "\n" * max(0, first - 1 - len(header)) + "".join(header) + body


def _say_edited(what, file):
    print("captured_step: %s of %s differs from the step captured: running the file's" % (what, os.path.basename(file)),
          file=sys.stderr)


def relocated(value, old_dir, new_dir):
    """`value` with each path under the script's directory at capture
    (`old_dir`) moved under the script's directory in this run: a step
    that opens os.path.join(HERE, "vocab.json") with HERE saved by value,
    or `__file__` taken with a top-level block's variables, reads the
    archive's copy beside the archive's script, not the user's file at its
    place on the capturing machine. Strings in lists, tuples and dicts
    are moved too; other objects are left as they are."""
    if not old_dir or old_dir == new_dir or old_dir == os.sep:
        return value
    if isinstance(value, str):
        if value == old_dir or value.startswith(old_dir + os.sep):
            return new_dir + value[len(old_dir):]
        return value
    # A container is rebuilt only when a path in it moved: one the step
    # shares with other objects (a config dict) stays the same object.
    if type(value) in (list, tuple):
        items = [relocated(v, old_dir, new_dir) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if type(value) is dict:
        items = {k: relocated(v, old_dir, new_dir) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    return value


def _script_named(captured_file, user_file):
    """The file a definition's code names: the script as this run has it
    (an archive's bundled copy) where the definition came from the script,
    not where the capture found it. A traceback reads its lines from the
    file its code names, and the archive must not read the user's copy on
    this machine nor miss it on a maintainer's."""
    if os.path.isabs(captured_file) and os.path.basename(captured_file) == os.path.basename(user_file):
        return os.path.abspath(user_file)
    return captured_file


def _device(name):
    if name.startswith("cuda") and not torch.cuda.is_available():
        return "cpu"
    return name


def load_state(path, module, module_name):
    """step_state.pt, with the user's classes found in `module` (pickle
    names the ones a script defines as __main__.NAME)."""
    saved_main = sys.modules["__main__"]
    if module_name == "__main__":
        sys.modules["__main__"] = module
    try:
        location = None if torch.cuda.is_available() else "cpu"
        return torch.load(path, map_location=location, **_weights_only(False))
    finally:
        sys.modules["__main__"] = saved_main


def load_batch(path):
    """The batch file, read as plain data where this torch can. PyTorch
    1.13's weights-only reader lacks pickle's float opcode, so a batch
    holding a Python float (an image's scale factor in its metadata) is read
    in full there: the file is this case's own, written by capture or by
    minrepro, as step_state.pt is, which is read in full everywhere."""
    try:
        return torch.load(path, map_location="cpu", **_weights_only(True))
    except pickle.UnpicklingError:
        return torch.load(path, map_location="cpu", **_weights_only(False))


def _weights_only(value):
    return {"weights_only": value} if "weights_only" in torch.load.__code__.co_varnames else {}


def _find_class(module_name, qualname, main):
    module = main if module_name == "__main__" else importlib.import_module(module_name)
    value = module
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def rebuild_batch(value, layout, others, main, path=()):
    """The batch as the step was given it, from what batch.pt holds: each
    tensor on its device, named tuples and mappings of their own class
    again, leaves kept with the state put back, keys capture added taken out."""
    wild = json.dumps(["*" if isinstance(k, int) else k for k in path])
    if isinstance(value, torch.Tensor):
        return value.to(_device(layout["devices"].get(wild, "cpu")))
    if isinstance(value, dict):
        items = {k: rebuild_batch(v, layout, others, main, path + (k,)) for k, v in value.items()
                 if not (not path and k in layout.get("added_keys", ()))}
        if wild in layout.get("classes", {}):
            return _find_class(*layout["classes"][wild], main)(items)
        return items
    if isinstance(value, (list, tuple)):
        items = [rebuild_batch(v, layout, others, main, path + (i,)) for i, v in enumerate(value)]
        if wild in layout.get("classes", {}):
            return _find_class(*layout["classes"][wild], main)(*items)
        return tuple(items) if isinstance(value, tuple) else items
    return others.get(json.dumps(list(path)), value)


def entry_at(batch, path):
    """The entry of the batch at a path of keys and indices (a tensor the block named)."""
    for key in path:
        batch = batch[key]
    return batch


def restore_rng(rng):
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["random"])
    # numpy only where the maintainer's Python has it: restoring its
    # generator must not make the archive need a package the step never
    # imported (torch imports numpy when it is installed).
    if rng.get("numpy") is not None:
        try:
            import numpy
        except ImportError:
            return
        numpy.random.set_state(rng["numpy"])
    if rng.get("cuda") is not None and torch.cuda.is_available() and len(rng["cuda"]) <= torch.cuda.device_count():
        torch.cuda.set_rng_state_all(rng["cuda"])


def switch_off(path, namespace, module):
    """Sets the branch variable `path` (name or name.attr...) to False."""
    root, *attrs = path.split(".")
    if not attrs:
        if root in namespace:
            namespace[root] = False
        else:
            setattr(module, root, False)
        return
    target = namespace[root] if root in namespace else getattr(module, root)
    for attr in attrs[:-1]:
        target = target[attr] if isinstance(target, dict) else getattr(target, attr)
    if isinstance(target, dict):
        target[attrs[-1]] = False
    else:
        setattr(target, attrs[-1], False)


def run_function(step, state, module, batch, off):
    fn = module
    for part in step["qualname"].split("."):
        fn = getattr(fn, part)
    fn = getattr(fn, "__wrapped_step__", fn)
    args, kwargs = list(state["args"]), dict(state["kwargs"])
    if isinstance(step["batch_at"], int):
        args[step["batch_at"]] = batch
    else:
        kwargs[step["batch_at"]] = batch
    named = dict(zip(step["parameters"], args), **kwargs)
    for path in off:
        switch_off(path, named, module)
    positional = [named[p] for p in step["parameters"][:len(args)]] + args[len(step["parameters"]):]
    return fn(*positional, **{k: named[k] for k in kwargs})


def run_block(step, state, module, user_file, batch, off):
    namespace = dict(vars(module))
    namespace.update(state["variables"])
    for name, path in step["batch_variables"].items():
        namespace[name] = batch if path is None else entry_at(batch, path)
    for name, module_name in step["modules"].items():
        namespace[name] = importlib.import_module(module_name)
    for path in off:
        switch_off(path, namespace, module)
    exec(compile(_block_as_edited(step, user_file), os.path.abspath(user_file), "exec"), namespace)
    return namespace["__minrepro_block__"]()


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: captured_step.py BATCH USER_FILE MODULE [--off BRANCH]...")
    batch_file, user_file, module_name = argv[1], argv[2], argv[3]
    off = [argv[i + 1] for i in range(4, len(argv) - 1) if argv[i] == "--off"]
    sys.dont_write_bytecode = True  # leave no __pycache__ beside the user's files
    with open(os.path.join(HERE, "step.json")) as f:
        step = json.load(f)
    _stand_in_for_capture()
    if "by_value" in step:
        module, module_name = build_by_value(step, user_file), "__main__"
    else:
        module = import_user_module(user_file, module_name, step["argv"])
    state = load_state(os.path.join(HERE, "step_state.pt"), module, module_name)
    script_dir = os.path.dirname(os.path.abspath(user_file))
    for group in ("args", "kwargs", "variables", "globals"):
        if group in state:
            state[group] = relocated(state[group], step.get("script_dir"), script_dir)
    vars(module).update(state.get("globals", {}))
    loaded = load_batch(batch_file)
    batch = rebuild_batch(loaded, step["layout"], state["others"], module)
    restore_rng(state["rng"])
    if step["kind"] == "function":
        run_function(step, state, module, batch, off)
    else:
        run_block(step, state, module, user_file, batch, off)
    print("captured_step: the step ran without an error")


if __name__ == "__main__":
    main(sys.argv)
