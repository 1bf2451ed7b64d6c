"""The failing ATen operator of a run, and a reproducer that calls only it.

Recording (install_on_torch_import(), from the sitecustomize.py beside this
file, when MINREPRO_OP_RECORD names a directory DIR): once the program
imports torch, a TorchDispatchMode sees every ATen operator call of the
process's main thread, forward and backward (the CPU autograd engine runs
it there), below the Python functionals and TorchScript alike.
- Before each call, its number and name are written to DIR/last-op-PID.txt
  (overwritten; removed when the process exits normally), so a process a
  signal kills leaves the call it died in.
- A call that raises leaves DIR/raised-PID-K/ (the last 8 of a process): its
  tensors in inputs.pt, saved together so that views stay views of one
  storage, and call.txt (the operator, every argument as Python source, the
  error, the call's number and phase).
- DIR/loaded-PID says that the process had the recorder.
- MINREPRO_OP_SAVE_AT=N:NAME saves call N the same way before it runs, into
  DIR/before-PID/: the call a signal ended, found by a first run.
- MINREPRO_OP_NONFINITE=1 checks every call's floating-point outputs: the
  first call whose output holds a NaN or an inf while its inputs are all
  finite leaves DIR/nonfinite-finite-PID/, the first whose output holds a
  NaN while its inputs hold none (an inf among them) DIR/nonfinite-nan-PID/,
  each with the inputs as they were before the call (an in-place call's are
  copied first). Where the first non-finite value of a NaN loss came from.
  Not counted: a call asked for an inf or a NaN by a number among its
  arguments (a mask filled with -inf, torch.full(..., float("nan"))), and
  the calls that return uninitialised memory (empty, new_empty, resize_):
  their NaN is whatever the allocator held.

Rendering: `python minrepro_op.py render CALL_DIR OUT_DIR [--literal]`
writes OUT_DIR/repro_op.py and OUT_DIR/call.txt for CALL_DIR's call with the
inputs in OUT_DIR/inputs.pt. With --literal, small plain tensors are written
into the script; the others are loaded from inputs.pt with weights_only=True.

call.txt is `key: value` lines, read by minrepro (engine/archive/op_repro.cc):
op, call, phase, index, pid, error, then one `arg:` per argument and one
`tensor:` per tensor (name, dtype, shape, stride, offset, device, storage).
Standard library and torch only; runs on torch 1.13 and 2.x.
"""
import atexit
import keyword
import math
import os
import re
import sys

_MAX_RAISED = 8
_LITERAL_MAX_ELEMENTS = 64
_PAD_KEY = "_minrepro_unused"
# Names a spelled-out tensor cannot take: the script's own.
_RESERVED = {"T", "HERE", "torch", "os", "sys", "inf", "nan"}


def _literal_dtypes():
    import torch
    return {torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
            torch.int8, torch.uint8, torch.bool}


class Unsupported(Exception):
    """An argument that cannot be written as Python source."""


# ---------------------------------------------------------------- arguments

def _tensor_key(name, tensors):
    key, n = name, 2
    while key in tensors:
        key, n = "%s_%d" % (name, n), n + 1
    return key


def _float_source(value):
    return repr(value) if math.isfinite(value) else "float(%r)" % repr(value)


def argument_source(value, name, tensors):
    """Python source for `value`; tensors go into `tensors` under a free name."""
    import torch
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
            raise Unsupported("a tensor subclass (%s)" % type(value).__name__)
        key = _tensor_key(name, tensors)
        tensors[key] = value
        return "T[%r]" % key
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return _float_source(value)
    if isinstance(value, complex):
        return "complex(%s, %s)" % (_float_source(value.real), _float_source(value.imag))
    if isinstance(value, (list, tuple)):
        items = [argument_source(v, "%s%d" % (name, i), tensors) for i, v in enumerate(value)]
        if isinstance(value, list):
            return "[%s]" % ", ".join(items)
        return "(%s)" % (items[0] + "," if len(items) == 1 else ", ".join(items))
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, torch.device):
        return "torch.device(%r)" % str(value)
    raise Unsupported("an argument of type %s" % type(value).__name__)


def describe_tensors(tensors):
    """One `tensor:` line per tensor; tensors sharing a storage name each other."""
    storages = {}
    for key, t in tensors.items():
        storages.setdefault(_storage_key(t), []).append(key)
    lines = []
    for key, t in tensors.items():
        if key == _PAD_KEY:
            continue
        others = [k for k in storages[_storage_key(t)] if k != key]
        lines.append("tensor: %s %s %s stride %s offset %d %s storage %s" % (
            key, str(t.dtype).replace("torch.", ""), _list(t.shape), _strides(t), _offset(t), t.device,
            "shared with " + ",".join(others) if others else "own"))
    return lines


def _list(values):
    return "[" + ",".join(str(int(v)) for v in values) + "]"


def _strides(t):
    try:
        return _list(t.stride())
    except RuntimeError:  # sparse and other layouts without strides
        return "-"


def _offset(t):
    try:
        return int(t.storage_offset())
    except RuntimeError:
        return 0


def _storage_key(t):
    """Tensors with the same key share a storage; empty storages share none."""
    try:
        storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        if storage.data_ptr() == 0:
            return ("empty", id(t))
        return (str(t.device), storage.data_ptr())
    except RuntimeError:
        return ("own", id(t))


# ---------------------------------------------------------------- recording

def _phase(func):
    import torch
    current = getattr(torch._C, "_current_autograd_node", None)
    if current is not None:
        return "backward" if current() is not None else "forward"
    # torch 1.13 has no way to ask; its backward kernels say so in their names.
    return "backward" if "backward" in func.__name__ else "unknown"


def save_call(directory, func, args, kwargs, index, error=None, check_finite=False):
    """inputs.pt and call.txt for one call; False when an argument cannot be written.
    `check_finite`: the call's failure is a non-finite output (call.txt says
    `check: finite`, and repro_op.py raises on one)."""
    import torch
    tensors = {}
    schema = func._schema.arguments
    try:
        arg_lines = ["arg: %s" % argument_source(v, schema[i].name if i < len(schema) else "arg%d" % i, tensors)
                     for i, v in enumerate(args)]
        arg_lines += ["kwarg: %s=%s" % (k, argument_source(v, k, tensors)) for k, v in kwargs.items()]
    except Unsupported as why:
        arg_lines, tensors = ["unsupported: %s" % why], {}
    os.makedirs(directory, exist_ok=True)
    saved = {k: t.detach() for k, t in tensors.items()}
    if len(saved) == 1:
        saved[_PAD_KEY] = torch.zeros(0)  # LibTorch 1.13 cannot read a dict of one entry; never used
    torch.save(saved, os.path.join(directory, "inputs.pt"))
    name = func.__name__  # "nll_loss_forward.default"
    packet, _, overload = name.rpartition(".")
    lines = ["op: aten::%s.%s" % (packet, overload) if func.namespace == "aten" else "op: %s::%s" % (func.namespace, name),
             "call: torch.ops.%s.%s.%s" % (func.namespace, packet, overload),
             "phase: %s" % _phase(func), "index: %d" % index, "pid: %d" % os.getpid()]
    if error is not None:
        lines.append("error: %s: %s" % (type(error).__name__, (str(error).strip().splitlines() or [""])[0]))
    if check_finite:
        lines.append("check: finite")
    lines += arg_lines + describe_tensors(tensors)
    with open(os.path.join(directory, "call.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")


def _floats(values):
    """The floating-point tensors among values, nested lists and tuples included."""
    import torch
    for v in values:
        if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()) and v.numel():
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _floats(v)


def _non_finite_number(values):
    """Whether values (nested lists and tuples included) hold a Python number that is inf or NaN."""
    for v in values:
        if isinstance(v, float) and not math.isfinite(v):
            return True
        if isinstance(v, (list, tuple)) and _non_finite_number(v):
            return True
    return False


# Calls whose output is memory nobody wrote yet: a NaN there is not made.
_UNINITIALISED = ("empty", "new_empty", "_empty", "resize_", "resize_as_")


def _uninitialised(func):
    name = func._schema.name.split("::")[-1]
    return name.startswith(_UNINITIALISED)


def _has_nan(tensors):
    import torch
    return any(bool(torch.isnan(t).any()) for t in tensors)


def _all_finite(tensors):
    import torch
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def _copied(value):
    """value with its tensors copied (the inputs of an in-place call, before it)."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


class _NonFiniteWatch:
    """The first call that makes a non-finite value out of finite inputs, and
    the first that makes a NaN out of inputs without one."""

    def __init__(self, directory):
        self.directory = directory
        self.found = set()  # "finite", "nan": which inputs the call had

    def before(self, func, args, kwargs):
        """What the check after the call needs, or None when both are found."""
        values = list(args) + list(kwargs.values())
        if len(self.found) == 2 or _uninitialised(func) or _non_finite_number(values):
            return None
        inputs = list(_floats(values))
        state = {"nan_free": not _has_nan(inputs), "finite": _all_finite(inputs)}
        if not state["nan_free"]:
            return None
        mutable = any(getattr(a.alias_info, "is_write", False) for a in func._schema.arguments)
        if mutable:
            state["args"], state["kwargs"] = _copied(args), _copied(kwargs)
        return state

    def after(self, state, func, args, kwargs, result, index):
        outputs = list(_floats(result if isinstance(result, (list, tuple)) else [result]))
        if not outputs:
            return
        import torch
        nans = sum(int(torch.isnan(t).sum()) for t in outputs)
        infs = sum(int(torch.isinf(t).sum()) for t in outputs)
        args, kwargs = state.get("args", args), state.get("kwargs", kwargs)
        for kind, made, clean in (("finite", nans + infs, state["finite"]), ("nan", nans, True)):
            if kind in self.found or not made or not clean:
                continue
            self.found.add(kind)
            error = FloatingPointError("%s returned %d NaN and %d inf values from %s inputs" % (
                func.__name__, nans, infs, "finite" if state["finite"] else "NaN-free"))
            save_call(os.path.join(self.directory, "nonfinite-%s-%d" % (kind, os.getpid())), func, args, kwargs,
                      index, error, check_finite=True)


class _Recorder:
    """Never changes what the program sees: a failure of the recorder itself
    (a full disk, an argument torch.save refuses) leaves a save-failed-PID
    note and the call goes on, its own error re-raised unchanged."""

    def __init__(self, directory):
        self.directory = directory
        self.index = 0
        self.raised = 0
        self.busy = False
        self.last_op = None
        self.note_calls = os.environ.get("MINREPRO_OP_NOTE_CALLS") == "1"
        save_at = os.environ.get("MINREPRO_OP_SAVE_AT", "")
        index, _, name = save_at.partition(":")
        self.save_at = (int(index), name) if index.isdigit() else None
        self.nonfinite = _NonFiniteWatch(directory) if os.environ.get("MINREPRO_OP_NONFINITE") == "1" else None

    def _failed(self, what):
        try:
            with open(os.path.join(self.directory, "save-failed-%d" % os.getpid()), "a") as out:
                out.write("%s: %s\n" % (what, sys.exc_info()[1]))
        except OSError:
            pass

    def _note(self, func, returned=False):
        """The call's number and name before it runs, and again with
        " returned" after (for a fatal signal: in the call, or after it)."""
        pid = os.getpid()
        if self.last_op is None or self.last_op[0] != pid:  # first call, or a forked child
            path = os.path.join(self.directory, "last-op-%d.txt" % pid)
            self.last_op = (pid, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), path)
        line = ("%d %s%s\n" % (self.index, func.__name__, " returned" if returned else "")).encode()
        os.pwrite(self.last_op[1], line, 0)
        os.ftruncate(self.last_op[1], len(line))

    def forget(self):
        """At a normal exit: this process did not die in a call."""
        try:
            if self.last_op is not None and self.last_op[0] == os.getpid():
                os.close(self.last_op[1])
                os.unlink(self.last_op[2])
                self.last_op = None
        except OSError:
            pass

    def _before(self, func, args, kwargs):
        self.index += 1
        if self.note_calls:
            self._note(func)
        if self.save_at == (self.index, func.__name__):
            save_call(os.path.join(self.directory, "before-%d" % os.getpid()), func, args, kwargs, self.index)

    def _raised(self, func, args, kwargs, error):
        # The last 8 of the process, oldest overwritten: errors a program
        # catches early must not crowd out the one that ends it.
        slot = self.raised % _MAX_RAISED
        self.raised += 1
        save_call(os.path.join(self.directory, "raised-%d-%d" % (os.getpid(), slot)), func, args, kwargs,
                  self.index, error)

    def call(self, func, args, kwargs):
        if self.busy:
            return func(*args, **kwargs)
        self.busy = True
        watch = None
        try:
            self._before(func, args, kwargs)
            if self.nonfinite is not None:
                watch = self.nonfinite.before(func, args, kwargs)
        except Exception:
            self._failed("before %s" % func.__name__)
        finally:
            self.busy = False
        try:
            result = func(*args, **kwargs)
            if self.note_calls:
                self._note(func, returned=True)
            if watch is not None:
                self.busy = True
                try:
                    self.nonfinite.after(watch, func, args, kwargs, result, self.index)
                except Exception:
                    self._failed("non-finite check of %s" % func.__name__)
                finally:
                    self.busy = False
            return result
        except Exception as error:
            self.busy = True
            try:
                self._raised(func, args, kwargs, error)
            except Exception:
                self._failed("raised %s" % func.__name__)
            finally:
                self.busy = False
            raise


def install():
    """Records this process's operator calls into $MINREPRO_OP_RECORD, from
    the moment torch is imported (in the main thread: a dispatch mode is
    per thread)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    import faulthandler
    recorder = _Recorder(os.environ["MINREPRO_OP_RECORD"])
    pid = os.getpid()
    # Tells minrepro that this process had the recorder (a trial that is not
    # Python, or runs it with -I, -E or -S, has none), and which process a
    # fatal signal ended: its fault file is the one that is not empty.
    open(os.path.join(recorder.directory, "loaded-%d" % pid), "w").close()
    if recorder.note_calls:
        recorder.fault_file = open(os.path.join(recorder.directory, "fault-%d.txt" % pid), "w")
        faulthandler.enable(file=recorder.fault_file)

    class _RecordCalls(TorchDispatchMode):
        # PyTorch 2.x wraps a mode's __torch_dispatch__ so that Dynamo skips
        # its frames, and that wrapper imports torch._dynamo at the first
        # call: most of a second added to every recorded run of a program
        # that never compiles. The wrapper is put on here only once the
        # program has imported Dynamo itself (to compile), before that
        # call is recorded.
        @classmethod
        def _should_skip_dynamo(cls):
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "torch._dynamo" in sys.modules and not _RecordCalls.dynamo_skipped:
                _RecordCalls.dynamo_skipped = True
                _RecordCalls.__torch_dispatch__ = torch._disable_dynamo(_RecordCalls.record, recursive=True)
            return recorder.call(func, args, kwargs or {})

    _RecordCalls.dynamo_skipped = not hasattr(torch, "_disable_dynamo")  # PyTorch 1.13 has no Dynamo
    _RecordCalls.record = _RecordCalls.__torch_dispatch__

    _RecordCalls().__enter__()  # for the whole process: never left
    atexit.register(recorder.forget)


class _InstallAfterTorch:
    """A meta-path finder that installs the recorder once `torch` is
    imported, so that a program's own settings before `import torch`
    (threads, environment) take effect as they would without it."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            sys.modules[name] = module
            try:
                install()
            except Exception:
                pass  # no recorder: minrepro sees no loaded-PID and says so

        spec.loader.exec_module = exec_then_install
        return spec


def install_on_torch_import():
    if "torch" in sys.modules:
        install()
    else:
        sys.meta_path.insert(0, _InstallAfterTorch())


# ---------------------------------------------------------------- rendering

def read_call(path):
    fields = {}
    with open(path) as lines:
        for line in lines:
            key, _, value = line.rstrip("\n").partition(": ")
            fields.setdefault(key, []).append(value)
    return fields


def literal_source(t):
    """Source that makes a plain tensor as it is: `torch.tensor([...])` when it
    is small, `torch.full(...)` when every element is the same; else None."""
    import torch
    plain = (t.layout == torch.strided and t.device.type == "cpu" and t.dtype in _literal_dtypes()
             and list(t.stride()) == _contiguous_strides(t.shape) and t.storage_offset() == 0
             and _storage_bytes(t) == t.numel() * t.element_size())
    if not plain:
        return None  # a view into a larger storage, a device, a layout: inputs.pt keeps it as it is
    if t.numel() == 0:
        return "torch.empty(%s, dtype=%s)" % (tuple(t.shape), t.dtype)
    first = t.reshape(-1)[0]
    same = bool((t == first).all()) or (t.is_floating_point() and bool(torch.isnan(t).all()))
    if same and t.is_floating_point():  # -0.0 == 0.0: the sign must agree too
        same = bool((torch.signbit(t) == torch.signbit(first)).all())
    if same and t.numel() > 1:
        return "torch.full(%s, %r, dtype=%s)" % (tuple(t.shape), first.item(), t.dtype)
    if t.numel() <= _LITERAL_MAX_ELEMENTS:
        return "torch.tensor(%r, dtype=%s)" % (t.tolist(), t.dtype)
    return None


def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(list(shape)):
        strides.insert(0, step)
        step *= max(int(size), 1)
    return strides


def _storage_bytes(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().nbytes()
    return t.storage().size() * t.element_size()  # torch 1.13


def _literals(tensors, call):
    """Source for each tensor the call uses that a script can spell out."""
    owners = {}
    for key, t in tensors.items():
        owners.setdefault(_storage_key(t), []).append(key)
    literals = {}
    for key, t in tensors.items():
        usable = key.isidentifier() and not keyword.iskeyword(key) and key not in _RESERVED
        if not usable or "T[%r]" % key not in call:
            continue
        sharing = owners[_storage_key(t)]
        if len(sharing) == 1:
            source = literal_source(t)
        elif _same_view(t, tensors[sharing[0]]) and all(_same_view(t, tensors[k]) for k in sharing):
            # The very same tensor passed twice (bmm(x, x)): spelled out once, then named again.
            source = literal_source(t) if key == sharing[0] else (sharing[0] if sharing[0] in literals else None)
        else:
            source = None
        if source is not None:
            literals[key] = source
    return literals


def _same_view(a, b):
    return (a.shape == b.shape and a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            and a.dtype == b.dtype)


def script_text(fields, call, literals, variants=False):
    """repro_op.py: the tensors `literals` spells out, the others loaded;
    with `variants`, honouring compare's MINREPRO_DETERMINISTIC as a
    program must (the script the reduction and compare run)."""
    for key in literals:
        call = call.replace("T[%r]" % key, key)
    loaded = re.findall(r"T\['([^']*)'\]", call)
    error = fields.get("error", ["a fatal signal"])[0]
    lines = ['"""%s, called alone as the failing case called it.' % fields["op"][0],
             "", "Made by minrepro; needs only PyTorch. Run: python3 repro_op.py", '"""',
             "# Fails with: %s" % "".join(c if c.isprintable() else "?" for c in error)]
    if loaded:
        lines += ["import os", "import sys", ""]
    if any(re.search(r"\b(nan|inf)\b", source) for source in literals.values()):
        lines += ["from math import inf, nan"] + ([] if loaded else [""])
    lines += ["import torch", ""]
    if loaded:
        lines += ['HERE = os.path.dirname(os.path.abspath(__file__))',
                  'T = torch.load(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "inputs.pt"), '
                  'weights_only=True)']
    if variants and loaded:
        lines += ['if os.environ.get("MINREPRO_DETERMINISTIC") == "1":',
                  "    torch.use_deterministic_algorithms(True)"]
    lines += ["%s = %s" % (key, source) for key, source in literals.items()]
    if "finite" in fields.get("check", []):
        # The failure is the output itself: a NaN or an inf from inputs without one.
        lines += ["out = " + call,
                  "for t in (out if isinstance(out, (list, tuple)) else [out]):",
                  "    if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):",
                  "        raise FloatingPointError(%r)" % error.split(": ", 1)[-1]]
        return "\n".join(lines) + "\n"
    return "\n".join(lines + [call]) + "\n"


def render(call_dir, out_dir, literal):
    """OUT_DIR/repro_op.py and call.txt for the call in CALL_DIR with the
    inputs in OUT_DIR/inputs.pt; without `literal`, torch is not imported."""
    fields = read_call(os.path.join(call_dir, "call.txt"))
    if "unsupported" in fields:
        raise SystemExit("cannot write this call: %s" % fields["unsupported"][0])
    args = fields.get("arg", []) + fields.get("kwarg", [])
    call = "%s(%s)" % (fields["call"][0], ", ".join(args))
    with open(os.path.join(call_dir, "call.txt")) as recorded:
        described = [line for line in recorded.read().splitlines() if not line.startswith("tensor: ")]
    literals = {}
    if literal:
        import torch
        tensors = torch.load(os.path.join(out_dir, "inputs.pt"), weights_only=True)
        literals = _literals(tensors, call)
        described += describe_tensors(tensors)
    else:
        described += ["tensor: " + t for t in fields.get("tensor", [])]
    with open(os.path.join(out_dir, "repro_op.py"), "w") as out:
        out.write(script_text(fields, call, literals, variants=not literal))
    with open(os.path.join(out_dir, "call.txt"), "w") as out:
        out.write("\n".join(described) + "\n")


def main(argv):
    if len(argv) >= 3 and argv[0] == "render":
        render(argv[1], argv[2], "--literal" in argv[3:])
        return 0
    sys.stderr.write("usage: minrepro_op.py render CALL_DIR OUT_DIR [--literal]\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
