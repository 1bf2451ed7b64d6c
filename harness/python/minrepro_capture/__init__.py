"""Capture the first failing step of a PyTorch training loop as a minrepro case.

    import minrepro_capture

    for step, (x, y, ids) in enumerate(loader):
        with minrepro_capture.capture("crash-case", model=model, step=step,
                                      batch={"input": x, "target": y}, sample_ids=ids,
                                      loss="cross_entropy", ignore_index=-100,
                                      dataloader=loader, batch_index=step):
            loss = F.cross_entropy(model(x), y)
            loss.backward()

On the first exception inside the block, the case directory gets:

- batch.pt   the batch dict, every tensor detached and on the CPU, plus
             `sample_id` (the ids given, or the positions 0..n-1);
- model.pt   torch.jit.script of the model (or of `submodule`), else
             torch.jit.trace on the input; with torch 2.x, when the model
             cannot be scripted, first torch.export: model.pt2 and
             exported_step.py, the harness's step in Python, as the trial
             command;
- case.yaml  in configs/README.md's format: the built-in harness with the loss
             settings (or `command=[...]` when the model cannot be exported),
             samples.tensors (every tensor whose first dimension is the batch
             size), ids, failure.family when it is certain, and the context
             (exception, step, last completed step, revision, versions,
             backend, devices, dtypes and shapes, last batch, branches).

When neither a model file nor a command can be written, CAPTURE-ERROR.txt says
why and case.yaml.draft holds everything else.

Other exceptions are re-raised after the case is written. After a device-side
assert the process cannot continue (the CUDA/HIP context is unusable): the case
is written and the process exits with DEVICE_ASSERT_EXIT_CODE.

Only the first failure of a process is captured; later ones are re-raised as is.
Standard library and torch only.
"""
import copy
import functools
import os
import platform
import subprocess
import sys
import traceback

import torch

__all__ = ["capture", "DEVICE_ASSERT_EXIT_CODE", "backend_of", "CaptureInfo"]

# Exit status after a device-side assert (distinct from Python's 1 and from signals).
DEVICE_ASSERT_EXIT_CODE = 87

_state = {"captured": False, "last_completed_step": None}

_DEVICE_ASSERT_MARKERS = ("device-side assert", "hipErrorAssert", "cudaErrorAssert",
                          "device-side assertion")


# The trial of a model captured with torch.export: what the built-in harness
# does with model.pt (harness/trial_main.cc), in Python.
_EXPORTED_STEP = '''"""minrepro_capture's trial for the model exported with torch.export
(model.pt2 beside this file): the model in eval mode without gradients on
the batch's input, then the loss against its target, as minrepro's built-in
harness runs a TorchScript model."""
import os
import sys

import torch
import torch.nn.functional as F

INPUT, TARGET, LOSS, IGNORE_INDEX = @INPUT@, @TARGET@, @LOSS@, @IGNORE_INDEX@

batch = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
model = torch.export.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.pt2")).module()
with torch.no_grad():
    output = model(batch[INPUT])
    print("exported_step: forward ok, output", output.dtype, list(output.shape))
    if LOSS == "cross_entropy":
        print("exported_step: cross_entropy loss", F.cross_entropy(output, batch[TARGET], ignore_index=IGNORE_INDEX).item())
    elif LOSS == "nll":
        print("exported_step: nll loss", F.nll_loss(output, batch[TARGET], ignore_index=IGNORE_INDEX).item())
'''


class CaptureInfo:
    """What the last capture wrote (minrepro_capture.last_capture)."""

    def __init__(self, case_dir, case_file, error_file, device_assert):
        self.case_dir = case_dir
        self.case_file = case_file       # case.yaml, or None when no trial could be written
        self.error_file = error_file     # CAPTURE-ERROR.txt, or None
        self.device_assert = device_assert


last_capture = None


def _reset_for_tests():
    _state["captured"] = False
    _state["last_completed_step"] = None


def is_device_assert(exc):
    text = str(exc)
    return any(m in text for m in _DEVICE_ASSERT_MARKERS)


def _yaml_str(value):
    """A double-quoted YAML scalar."""
    text = str(value)
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _save_whole(save, path):
    """Runs save(tmp) and renames tmp to path: a save that fails half-way
    (scripting or tracing raised while writing) leaves no partial file that
    a later step or the user would take for the model."""
    tmp = path + ".partial"
    try:
        save(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _first_message(exc):
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _git_revision():
    main = sys.modules.get("__main__")
    start = os.path.dirname(os.path.abspath(getattr(main, "__file__", "") or ".")) or os.getcwd()
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=start, capture_output=True, text=True,
                             timeout=10)
        if rev.returncode != 0:
            return None
        revision = rev.stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=start,
                               capture_output=True, text=True, timeout=10)
        if dirty.returncode == 0 and dirty.stdout.strip():
            revision += " (uncommitted changes)"
        return revision
    except (OSError, subprocess.SubprocessError):
        return None


def backend_of(device_type):
    """The backend text minrepro's diagnostic mode reads: "cpu", "cuda 12.1", "rocm 5.7.x"."""
    if device_type != "cuda":
        return device_type
    hip = getattr(torch.version, "hip", None)
    if hip:
        return "rocm " + str(hip)
    return "cuda " + str(torch.version.cuda)


def _as_dict(batch, input_key, target_key):
    if isinstance(batch, dict):
        return dict(batch)
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return {input_key: batch[0], target_key: batch[1]}
    if isinstance(batch, torch.Tensor):
        return {input_key: batch}
    raise TypeError("minrepro_capture: batch must be a dict of tensors, an (input, target) pair or a tensor, "
                    "found %s" % type(batch).__name__)


def _ids_tensor(sample_ids):
    if isinstance(sample_ids, torch.Tensor):
        return sample_ids.detach().cpu().reshape(-1).to(torch.int64)
    return torch.tensor([int(i) for i in sample_ids], dtype=torch.int64)


def _infer_last_batch(dataloader, batch_index):
    """True/False when the loader says whether batch_index is its last, incomplete batch."""
    if dataloader is None or batch_index is None:
        return None
    try:
        n_batches = len(dataloader)
        dataset_len = len(dataloader.dataset)
        batch_size = dataloader.batch_size
    except (TypeError, AttributeError):
        return None
    if batch_size is None:
        return None
    incomplete = dataset_len % batch_size != 0 and not getattr(dataloader, "drop_last", False)
    return batch_index == n_batches - 1 and incomplete


class capture:
    """Context manager (and decorator) writing a minrepro case on the first failure."""

    def __init__(self, out_dir, model=None, loss="cross_entropy", ignore_index=-100, step=None, batch=None,
                 sample_ids=None, input_key="input", target_key="target", submodule=None, command=None,
                 last_batch=None, dataloader=None, batch_index=None, branches=None, last_completed_step=None,
                 timeout=60):
        if loss not in ("cross_entropy", "nll", "none", None):
            raise ValueError("minrepro_capture: loss must be 'cross_entropy', 'nll' or 'none', found %r" % (loss,))
        if command is not None:
            if isinstance(command, str) or not all(isinstance(c, str) for c in command):
                raise TypeError("minrepro_capture: command is an argv list of strings (never a shell line)")
            if not any("{batch}" in c for c in command):
                raise ValueError("minrepro_capture: some element of command must contain {batch}")
        self.out_dir = out_dir
        self.model = model
        self.loss = "none" if loss is None else loss
        self.ignore_index = int(ignore_index)
        self.step = step
        self.batch = batch
        self.sample_ids = sample_ids
        self.input_key = input_key
        self.target_key = target_key
        self.submodule = submodule
        self.command = list(command) if command is not None else None
        self.last_batch = last_batch
        self.dataloader = dataloader
        self.batch_index = batch_index
        self.branches = dict(branches) if branches else {}
        self.last_completed_step = last_completed_step
        self.timeout = timeout

    # --------------------------------------------------------------- protocol
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            if self.step is not None:
                _state["last_completed_step"] = self.step
            return False
        if not issubclass(exc_type, Exception) or _state["captured"]:
            return False  # KeyboardInterrupt, SystemExit, or a later failure: not ours
        _state["captured"] = True
        device_assert = is_device_assert(exc)
        try:
            info = self._write(exc, tb, device_assert)
        except Exception as write_error:  # never hide the user's error behind ours
            sys.stderr.write("minrepro_capture: could not write the case to %s: %s: %s\n"
                             % (self.out_dir, type(write_error).__name__, write_error))
            info = None
        if info is not None:
            where = info.case_file or info.error_file
            at = "" if self.step is None else " at step %s" % self.step
            sys.stderr.write("minrepro_capture: wrote %s (%s%s)\n" % (where, exc_type.__name__, at))
            if info.case_file:
                sys.stderr.write("minrepro_capture: reduce it with: minrepro shrink --config %s\n" % info.case_file)
        if device_assert:
            sys.stderr.write(
                "minrepro_capture: a device-side assert invalidates this process's CUDA/HIP context "
                "(existing allocations are lost); training cannot continue in this process. Exiting "
                "with status %d. Restarting will not fix the cause: check the captured batch's "
                "indices and targets.\n" % DEVICE_ASSERT_EXIT_CODE)
            sys.stderr.flush()
            sys.exit(DEVICE_ASSERT_EXIT_CODE)
        return False

    def __call__(self, fn):
        """Decorator: the step function's `batch` and `step` arguments (by name, or the first
        positional dict/tuple as the batch) fill in what the decorator was not given."""

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            batch = self.batch
            if batch is None:
                batch = kwargs.get("batch")
                if batch is None:
                    batch = next((a for a in args if isinstance(a, (dict, tuple, list))), None)
            step = self.step if self.step is not None else kwargs.get("step")
            bound = capture(self.out_dir, model=self.model, loss=self.loss, ignore_index=self.ignore_index,
                            step=step, batch=batch, sample_ids=kwargs.get("sample_ids", self.sample_ids),
                            input_key=self.input_key, target_key=self.target_key, submodule=self.submodule,
                            command=self.command, last_batch=self.last_batch, dataloader=self.dataloader,
                            batch_index=kwargs.get("batch_index", self.batch_index), branches=self.branches,
                            last_completed_step=self.last_completed_step, timeout=self.timeout)
            with bound:
                return fn(*args, **kwargs)

        return wrapper

    # ----------------------------------------------------------------- writing
    def _write(self, exc, tb, device_assert):
        global last_capture
        if self.batch is None:
            raise ValueError("no batch was given to capture()")
        os.makedirs(self.out_dir, exist_ok=True)
        out_dir = os.path.abspath(self.out_dir)
        problems = []

        raw = _as_dict(self.batch, self.input_key, self.target_key)
        tensors, skipped, devices = {}, [], {}
        for name, value in raw.items():
            if isinstance(value, torch.Tensor):
                devices[name] = str(value.device)
                tensors[str(name)] = value.detach().cpu()
            else:
                skipped.append(str(name))
        if self.input_key not in tensors:
            raise ValueError("the batch has no tensor %r (input_key)" % self.input_key)
        n = tensors[self.input_key].shape[0] if tensors[self.input_key].dim() > 0 else 1

        ids_key = "sample_id"
        if self.sample_ids is not None:
            ids = _ids_tensor(self.sample_ids)
            if ids.numel() != n:
                problems.append("sample_ids has %d entries for a batch of %d; positions used instead"
                                % (ids.numel(), n))
                ids = torch.arange(n, dtype=torch.int64)
                ids_source = "positions in the batch (sample_ids had the wrong length)"
            else:
                ids_source = "given"
        else:
            ids = torch.arange(n, dtype=torch.int64)
            ids_source = "positions in the batch (no sample_ids given)"
        while ids_key in tensors:
            ids_key = "_" + ids_key
        tensors[ids_key] = ids  # also makes the dict at least two entries (LibTorch reads no one-entry dict)

        sample_tensors = [name for name, t in tensors.items()
                          if name != ids_key and t.dim() > 0 and t.shape[0] == n]
        torch.save(tensors, os.path.join(out_dir, "batch.pt"))

        trial_lines, model_note = self._trial(out_dir, tensors, problems)
        context = self._context(exc, tb, devices, tensors, ids_key, ids_source, skipped, n, model_note)
        family = self._family(exc, devices, trial_lines)

        lines = ["# Written by minrepro_capture at the first failure; reduce with:",
                 "#   minrepro shrink --config case.yaml",
                 "batch: batch.pt",
                 "samples:",
                 "  tensors: {%s}" % ", ".join("%s: 0" % _yaml_str(s) for s in sample_tensors),
                 "  ids: %s" % _yaml_str(ids_key)]
        if trial_lines is not None:
            lines += trial_lines
        else:
            lines += ["# trial: no model file and no command: see CAPTURE-ERROR.txt",
                      "#   harness: {model: model.pt, input: %s}" % self.input_key,
                      "#   command: [/usr/bin/python3, \"{case_dir}/step.py\", \"{batch}\"]"]
        if family:
            lines += ["failure:", "  family: %s" % family]
        lines += ["reducers: [samples]", "output: repro.tar.gz", "context:"]
        lines += ["  %s: %s" % (key, _yaml_str(value)) for key, value in context]
        text = "\n".join(lines) + "\n"

        error_file = None
        if trial_lines is None:
            case_file = None
            with open(os.path.join(out_dir, "case.yaml.draft"), "w") as f:
                f.write(text)
        else:
            case_file = os.path.join(out_dir, "case.yaml")
            tmp = case_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, case_file)
        if problems:
            error_file = os.path.join(out_dir, "CAPTURE-ERROR.txt")
            with open(error_file, "w") as f:
                f.write("minrepro_capture: %s\n" % ("the case is incomplete: no trial could be written"
                                                    if case_file is None else "notes on the captured case"))
                for p in problems:
                    f.write("- %s\n" % p)
        last_capture = CaptureInfo(out_dir, case_file, error_file, device_assert)
        return last_capture

    def _trial(self, out_dir, tensors, problems):
        """The trial section's lines (None when none can be written) and a note for the context.

        The model slice, in order: torch.jit.script (model.pt, the built-in
        harness); with torch 2.x, torch.export (model.pt2 and a Python step,
        see _export_trial); torch.jit.trace (model.pt); the user's command."""
        if self.model is None:
            return self._command_trial(problems, "none given")
        module = self.model
        if self.submodule:
            module = self.model.get_submodule(self.submodule)
        if _device_of(module) != "cpu":
            # A CPU copy: scripting shares parameters, and .cpu() on it would move the user's model.
            module = copy.deepcopy(module).cpu()
        mode = "training" if module.training else "eval"
        failed = []  # (what was tried, why it failed), for the note and CAPTURE-ERROR.txt

        def why(error):
            return "%s: %s" % (type(error).__name__, _first_message(error))
        try:
            _save_whole(lambda path: torch.jit.save(torch.jit.script(module), path), os.path.join(out_dir, "model.pt"))
            return self._harness_trial(tensors), "torch.jit.script (%s mode)" % mode
        except Exception as error:
            failed.append(("script", why(error)))
        if hasattr(torch, "export") and hasattr(torch.export, "Dim"):
            try:
                lines = self._export_trial(out_dir, module, tensors)
                return lines, "torch.export (script failed: %s) (run in eval mode, as the harness runs)" % failed[0][1]
            except Exception as error:
                failed.append(("export", why(error)))
        try:
            _save_whole(lambda path: torch.jit.save(torch.jit.trace(module, tensors[self.input_key]), path),
                        os.path.join(out_dir, "model.pt"))
            return self._harness_trial(tensors), "torch.jit.trace (%s) (%s mode)" % (
                "; ".join("%s failed: %s" % f for f in failed), mode)
        except Exception as error:
            failed.append(("trace", why(error)))
        participle = {"script": "scripted", "export": "exported", "trace": "traced"}
        problems.append("model.pt not written: the model could not be %s" % ", nor ".join(
            "%s (%s)" % (participle[what], reason) for what, reason in failed))
        return self._command_trial(problems, "not exported")

    def _harness_trial(self, tensors):
        lines = ["trial:", "  harness:", "    model: model.pt", "    input: %s" % _yaml_str(self.input_key)]
        if self.loss != "none" and self.target_key in tensors:
            lines += ["    target: %s" % _yaml_str(self.target_key), "    loss: %s" % self.loss,
                      "    ignore_index: %d" % self.ignore_index]
        return lines + ["  timeout: %s" % self.timeout]

    def _export_trial(self, out_dir, module, tensors):
        """torch 2.x: the model as a torch.export program (model.pt2) and
        exported_step.py, the built-in harness's step in Python (eval mode,
        no gradients, the loss against the target), as the trial command.
        Why before trace: trace keeps one path through the Python code
        silently, for the example's values; export refuses data-dependent
        branches and turns shape-dependent ones into guards that fail loudly
        on a batch that would take another path. Every dimension of the input
        is exported as Dim.AUTO, so the reducers' smaller batches and shorter
        sequences run the same program."""
        x = tensors[self.input_key]
        model = copy.deepcopy(module).eval()
        auto = {d: torch.export.Dim.AUTO for d in range(x.dim())}
        program = torch.export.export(model, (x,), dynamic_shapes=(auto,))
        outputs = program.graph_signature.user_outputs
        if len(outputs) != 1 or not program.call_spec.out_spec.is_leaf():
            raise TypeError("the exported model returns %d values, not one tensor" % len(outputs))
        torch.export.save(program, os.path.join(out_dir, "model.pt2"))
        loss = self.loss if self.loss != "none" and self.target_key in tensors else "none"
        with open(os.path.join(out_dir, "exported_step.py"), "w") as f:
            f.write(_EXPORTED_STEP.replace("@INPUT@", repr(self.input_key))
                    .replace("@TARGET@", repr(self.target_key)).replace("@LOSS@", repr(loss))
                    .replace("@IGNORE_INDEX@", str(int(self.ignore_index))))
        return ["trial:", "  command: [%s, \"-u\", \"{case_dir}/exported_step.py\", \"{batch}\"]"
                % _yaml_str(sys.executable), "  timeout: %s" % self.timeout]

    def _command_trial(self, problems, note):
        if self.command is not None:
            return (["trial:", "  command: [%s]" % ", ".join(_yaml_str(c) for c in self.command),
                     "  timeout: %s" % self.timeout], note + "; the user's command is the trial")
        problems.append("the model could not be scripted, exported or traced%s and no command=[...] was given, so "
                        "case.yaml has no trial: pass command=[python, script, '{batch}'] to capture() or "
                        "fill in the trial in case.yaml.draft and rename it to case.yaml"
                        % ("" if self.model is not None else " (no model was given)"))
        return None, note

    def _family(self, exc, devices, trial_lines):
        """failure.family only when the trial will fail the same way for certain: the built-in
        harness or the exported model's step, which runs the same way (a user's command may
        fail its own way), and a batch that ran on the CPU (a CUDA device assert becomes an
        IndexError on the CPU harness)."""
        ours = trial_lines is not None and (trial_lines[1] == "  harness:" or "/exported_step.py" in trial_lines[1])
        if not ours or any(d != "cpu" for d in devices.values()):
            return None
        name = type(exc).__name__
        if name == "IndexError":
            return "index-error"
        if name in ("ValueError", "TypeError"):
            return "value-error"
        return None

    def _context(self, exc, tb, devices, tensors, ids_key, ids_source, skipped, n, model_note):
        ctx = [("exception", type(exc).__name__), ("message", _first_message(exc))]
        frames = traceback.extract_tb(tb) if tb is not None else []
        if frames:
            last = frames[-1]
            ctx.append(("raised_at", "%s:%d in %s" % (os.path.basename(last.filename), last.lineno, last.name)))
        ctx.append(("step", "" if self.step is None else self.step))
        last_done = self.last_completed_step
        if last_done is None:
            last_done = _state["last_completed_step"]
        ctx.append(("last_completed_step", "none" if last_done is None else last_done))
        ctx.append(("revision", _git_revision() or "unknown (not in a git repository)"))
        ctx.append(("python", platform.python_version()))
        ctx.append(("pytorch", torch.__version__))
        used = sorted({d.split(":")[0] for d in devices.values()})
        ctx.append(("backend", ", ".join(backend_of(d) for d in used) or "cpu"))
        ctx.append(("torch_build", "rocm %s" % torch.version.hip if getattr(torch.version, "hip", None)
                    else ("cuda %s" % torch.version.cuda if torch.version.cuda else "cpu only")))
        ctx.append(("devices", ", ".join(_device_names(sorted(set(devices.values()))))))
        ctx.append(("batch_size", n))
        last_batch = self.last_batch
        if last_batch is None:
            last_batch = _infer_last_batch(self.dataloader, self.batch_index)
        ctx.append(("last_batch", "unknown" if last_batch is None
                    else ("yes (incomplete)" if last_batch else "no")))
        ctx.append(("sample_ids", ids_source))
        for name, t in tensors.items():
            if name == ids_key:
                continue
            ctx.append(("tensor_" + name, "%s %s on %s" % (str(t.dtype).replace("torch.", ""),
                                                            list(t.shape), devices.get(name, "cpu"))))
        if skipped:
            ctx.append(("not_tensors", ", ".join(skipped)))
        ctx.append(("model", model_note))
        if self.branches:
            ctx.append(("branches", ", ".join("%s=%s" % (k, v) for k, v in self.branches.items())))
        return [(k, "" if v is None else v) for k, v in ctx]


def _device_of(module):
    for p in module.parameters():
        return str(p.device.type)
    return "cpu"


def _device_names(devices):
    names = []
    for d in devices:
        if d.startswith("cuda"):
            try:
                index = int(d.split(":")[1]) if ":" in d else torch.cuda.current_device()
                names.append("%s %s" % (d, torch.cuda.get_device_name(index)))
            except Exception:  # after a device assert the driver may refuse: keep the name we know
                names.append(d)
        else:
            names.append("%s %s" % (d, platform.processor() or platform.machine()))
    return names
