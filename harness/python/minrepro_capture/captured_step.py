"""minrepro's trial for a training step captured by minrepro_capture.

    python captured_step.py BATCH USER_FILE MODULE [--off BRANCH]...

Runs the user's own step on BATCH (a torch.save'd dict of tensors: the
failing batch or a smaller one): the decorated step function, called with
the arguments it had at the failure, or the body of the `with capture(...)`
block, run with the variables it used. Those objects (model, optimizer,
arguments) and the random number generators' states at the step's start
were saved beside this file as step_state.pt (step.json says
which step it is and how the batch was laid out); the batch's tensors take the
place of the batch the step was given, on the devices it had them (the CPU
when that device is missing here).

USER_FILE is the file that defines the step. It is imported as MODULE,
never run as a script, so that its `if __name__ == "__main__":` part stays
off; a file whose import runs the training loop is an error said as such.
`minrepro_capture` is replaced by a stand-in while the step runs, so that
the trial neither captures again nor needs minrepro installed. --off NAME
switches one of the branches capture recorded off (it sets the named
variable or attribute to False).

Standard library and torch only: the archive runs where minrepro is not
installed."""
import functools
import importlib
import importlib.util
import json
import os
import random
import sys
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


def _weights_only(value):
    return {"weights_only": value} if "weights_only" in torch.load.__code__.co_varnames else {}


def batch_values(layout, tensors, others):
    """Each of the batch's entries, as the step had it: a tensor on its device, or a saved value."""
    return {key: tensors[key].to(_device(layout["devices"].get(key, "cpu"))) if key in tensors else others[key]
            for key in layout["keys"]}


def rebuild_batch(layout, values):
    """The batch as the step was given it: a dict, a tuple or list, or one tensor."""
    if layout["kind"] == "tensor":
        return values[layout["keys"][0]]
    ordered = [values[key] for key in layout["keys"]]
    if layout["kind"] == "dict":
        return dict(zip(layout["keys"], ordered))
    return tuple(ordered) if layout["kind"] == "tuple" else ordered


def restore_rng(rng):
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["random"])
    if rng.get("numpy") is not None:
        import numpy
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


def run_block(step, state, module, user_file, batch, values, off):
    namespace = dict(vars(module))
    namespace.update(state["variables"])
    for name, key in step["batch_variables"].items():
        namespace[name] = batch if key is None else values[key]
    for name, module_name in step["modules"].items():
        namespace[name] = importlib.import_module(module_name)
    for path in off:
        switch_off(path, namespace, module)
    exec(compile(step["source"], os.path.abspath(user_file), "exec"), namespace)
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
    module = import_user_module(user_file, module_name, step["argv"])
    state = load_state(os.path.join(HERE, "step_state.pt"), module, module_name)
    values = batch_values(step["layout"], torch.load(batch_file, map_location="cpu", **_weights_only(True)),
                          state["others"])
    batch = rebuild_batch(step["layout"], values)
    restore_rng(state["rng"])
    if step["kind"] == "function":
        run_function(step, state, module, batch, off)
    else:
        run_block(step, state, module, user_file, batch, values, off)
    print("captured_step: the step ran without an error")


if __name__ == "__main__":
    main(sys.argv)
