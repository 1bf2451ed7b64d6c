"""Capture the first failing step of a PyTorch training loop as a minrepro case.

    import minrepro_capture

    for step, (x, y, ids) in enumerate(loader):
        with minrepro_capture.capture("crash-case", model=model, step=step,
                                      batch={"input": x, "target": y}, sample_ids=ids,
                                      loss="cross_entropy", ignore_index=-100,
                                      dataloader=loader, batch_index=step):
            loss = F.cross_entropy(model(x), y)
            loss.backward()

On the first exception inside the block (or the decorated step function),
the case directory gets:

- batch.pt   the batch as the step was given it (any nesting of dicts, lists
             and tuples), every tensor detached and on the CPU, plus
             `sample_id` in a dict batch when sample_ids is given and the
             batch does not hold them (the trial takes it out again);
- the trial: the step itself, by default (trial="auto"): captured_step.py,
             step.json and step_state.pt, which run the decorated function
             with the arguments it had, or the with block's body with the
             variables it started from, on a batch file (see _step.py);
             the model slice with trial="model" or when the step cannot be
             saved (see _model_slice.py: model.pt, or model.pt2 and
             exported_step.py); or the user's command=[...] when given;
- case.yaml  in configs/README.md's format, without a samples section:
             minrepro infers the samples, ids, lengths and sequence axes
             from batch.pt when it opens the case, as for a batch given
             without a case (one inference for every way in); the trial
             (with `branches={"path": True}` as switches the branches pass
             may turn off), failure.family where the trial runs as the
             step did (after the test run, even one that failed another
             way: shrink must stop, not reduce that), and the context (exception, step, last
             completed step, revision, versions, backend, devices, dtypes
             and shapes, last batch, branches, the test run).

Then the case is run once in a fresh process (test_run=True): when it does
not fail the same way, CAPTURE-ERROR.txt says so and why (a file opened by
a relative name, found where training ran; a command whose script is not
there; else the likely causes). When
no trial can be written, CAPTURE-ERROR.txt says why and case.yaml.draft
holds everything else.

Other exceptions are re-raised after the case is written. After a device-side
assert the process cannot continue (the CUDA/HIP context is unusable): the case
is written and the process exits with DEVICE_ASSERT_EXIT_CODE.

Only the first failure of a process is captured; later ones are re-raised as is.
Standard library and torch only.
"""
import functools
import json
import os
import platform
import re
import subprocess
import sys
import traceback

import torch

from . import _batch, _model_slice, _step, _testrun

__all__ = ["capture", "DEVICE_ASSERT_EXIT_CODE", "backend_of", "CaptureInfo"]

# Exit status after a device-side assert (distinct from Python's 1 and from signals).
DEVICE_ASSERT_EXIT_CODE = 87

_state = {"captured": False, "last_completed_step": None, "completed": 0}

_DEVICE_ASSERT_MARKERS = ("device-side assert", "hipErrorAssert", "cudaErrorAssert",
                          "device-side assertion")


class CaptureInfo:
    """What the last capture wrote (minrepro_capture.last_capture)."""

    def __init__(self, case_dir, case_file, error_file, device_assert, test_run=None, notes=()):
        self.case_dir = case_dir
        self.notes = list(notes)         # CAPTURE-ERROR.txt's lines
        self.case_file = case_file       # case.yaml, or None when no trial could be written
        self.error_file = error_file     # CAPTURE-ERROR.txt, or None
        self.device_assert = device_assert
        self.test_run = test_run         # _testrun.TestRun, or None when the case was not run


last_capture = None


# Marks a directory a capture wrote: the next capture may replace its files.
_MARK = ".minrepro-capture"

# What a capture writes in its directory (removed from a capture's own
# directory before it writes again).
_WRITTEN = ("batch.pt", "case.yaml", "case.yaml.draft", "CAPTURE-ERROR.txt", "model.pt", "model.pt2",
            "exported_step.py") + _step.STEP_FILES


def _claim_directory(out_dir):
    """The directory this capture writes: out_dir when it is new, empty or
    an earlier capture's (its mark), else the first such out_dir-2, -3, ...:
    a capture at a crash must neither fail nor replace the user's files
    (their own case.yaml, batch.pt, notes) nor write through a link."""
    for i in range(1, 1000):
        d = out_dir if i == 1 else "%s-%d" % (out_dir, i)
        if os.path.islink(d) or (os.path.exists(d) and not os.path.isdir(d)):
            continue
        if os.path.isdir(d) and os.listdir(d) and not os.path.isfile(os.path.join(d, _MARK)):
            continue
        os.makedirs(d, exist_ok=True)
        # The earlier capture's files go first, by name: a hard or symbolic
        # link put under one of them is removed, never written through, and
        # an earlier CAPTURE-ERROR.txt does not stay beside the new case.
        for name in _WRITTEN + (_MARK,):
            path = os.path.join(d, name)
            if os.path.lexists(path) and not os.path.isdir(path):
                os.unlink(path)
        with open(os.path.join(d, _MARK), "w") as f:
            f.write("written by minrepro_capture; a later capture replaces what it wrote here\n")
        if d != out_dir:
            sys.stderr.write("minrepro_capture: %s holds files that are not a capture's; writing %s instead\n"
                             % (out_dir, d))
        return d
    raise OSError("no free directory for the capture beside %s" % out_dir)


def _reset_for_tests():
    _state["captured"] = False
    _state["last_completed_step"] = None
    _state["completed"] = 0


def is_device_assert(exc):
    text = str(exc)
    return any(m in text for m in _DEVICE_ASSERT_MARKERS)


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


def _batch_items(batch, input_key, target_key):
    """The model slice's view of the batch, by name: a dict's own entries,
    an (input, target) pair's, batch_0.. for a longer tuple or list,
    input_key for one tensor (the built-in harness takes named tensors)."""
    if isinstance(batch, dict):
        return {str(k): v for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        names = [input_key, target_key] if len(batch) == 2 else ["batch_%d" % i for i in range(len(batch))]
        return dict(zip(names, batch))
    if isinstance(batch, torch.Tensor):
        return {input_key: batch}
    raise TypeError("minrepro_capture: batch must be a dict, a tuple or list, or a tensor, found %s"
                    % type(batch).__name__)


class _Batch:
    """The batch as batch.pt holds it (_batch.py: the step's own nesting,
    every tensor detached and on the CPU) and, for the model slice, as named
    tensors."""

    def __init__(self, batch, input_key, target_key, sample_ids, problems):
        self.saved = _batch.SavedBatch(batch, sample_ids, problems)
        self.given = batch
        self.n = self.saved.batch_size()
        self.input_key, self.target_key = input_key, target_key

    def flat(self):
        """Named CPU tensors for the built-in harness (the model slice), with
        the sample ids given (the harness ignores what it is not told to take)."""
        items = _batch_items(self.given, self.input_key, self.target_key)
        flat = {k: v.detach().cpu() for k, v in items.items() if isinstance(v, torch.Tensor)}
        for key in self.saved.added_keys:
            flat[key] = self.saved.saved[key]
        return flat


def _test_run_problem(test, exc, pinned):
    """CAPTURE-ERROR.txt's words for a test run that did not fail as the step
    did: the cause when the run says it (a file opened by a relative name
    that is where training ran), else the likely ones."""
    what = {"different": "failed another way: " + test.detail, "passed": "did not fail",
            "timeout": "did not finish: " + test.detail}[test.verdict]
    missing = re.search(r"^FileNotFoundError: .*No such file or directory: '([^'/][^']*)'$", test.detail)
    if missing and os.path.exists(missing.group(1)):
        name = missing.group(1)
        cause = ("The step opened '%s' by a relative name, which resolves from the directory it runs in: training "
                 "ran in %s, where it is, and the trial runs in an empty directory of its own. Open it relative to "
                 "the script, os.path.join(os.path.dirname(os.path.abspath(__file__)), '%s') (the archive then "
                 "carries it beside its copy of the script), or by an absolute path"
                 % (name, os.getcwd(), name))
    elif "can't open file" in test.detail:
        cause = ("The trial's command names a script that is not there: put it where the command says (copy your "
                 "step script into the case directory when the command names {case_dir}), or give capture() the "
                 "command that runs your step")
    else:
        cause = ("Likely causes: randomness the saved generator states do not cover (a DataLoader worker, an "
                 "unseeded generator of your own), state the step changed before it failed (weights after "
                 "optimizer.step, counters), or files read relative to the directory training ran in (the trial "
                 "runs in an empty one)")
    then = ("minrepro shrink will stop with exit 3 on this case until it fails the same way (case.yaml's failure "
            "section says how the step failed)" if pinned else
            "fix this before minrepro shrink: it would reduce the failure its first run meets, which is not this one")
    return "the case was run once in a fresh process and %s (the step raised %s: %s). %s. %s" % (
        what, type(exc).__name__, _model_slice.first_message(exc), cause, then)


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


_block_reads = {}  # (file, line) -> the names a top-level block reads, parsed once


def _entry_values(frame):
    if frame.f_code.co_name != "<module>":
        return dict(frame.f_locals)
    key = (frame.f_code.co_filename, frame.f_lineno)
    if key not in _block_reads:
        _block_reads[key] = _step.block_reads(*key)
    names = _block_reads[key] or ()
    return {name: frame.f_globals[name] for name in names if name in frame.f_globals}


class capture:
    """Context manager (and decorator) writing a minrepro case on the first failure."""

    def __init__(self, out_dir, model=None, loss="cross_entropy", ignore_index=-100, step=None, batch=None,
                 sample_ids=None, input_key="input", target_key="target", submodule=None, command=None,
                 last_batch=None, dataloader=None, batch_index=None, branches=None, last_completed_step=None,
                 timeout=60, trial="auto", test_run=True):
        if trial not in ("auto", "step", "model"):
            raise ValueError("minrepro_capture: trial must be 'auto', 'step' or 'model', found %r" % (trial,))
        if loss not in ("cross_entropy", "nll", "none", None):
            raise ValueError("minrepro_capture: loss must be 'cross_entropy', 'nll' or 'none', found %r" % (loss,))
        if command is not None:
            if isinstance(command, str) or not all(isinstance(c, str) for c in command):
                raise TypeError("minrepro_capture: command is an argv list of strings (never a shell line)")
            if not any("{batch}" in c for c in command):
                raise ValueError("minrepro_capture: some element of command must contain {batch}")
        # Resolved now, where the loop runs: a step that changes directory
        # before it fails must not move the case (probe 37: a step's
        # os.chdir("/") put it in /crash-chdir).
        self.out_dir = os.path.abspath(os.fspath(out_dir))
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
        self.branches = dict(branches) if isinstance(branches, dict) else {b: True for b in branches or ()}
        self.last_completed_step = last_completed_step
        self.timeout = timeout
        self.trial = trial
        self.test_run = test_run
        self._step_call = None   # (fn, args, kwargs, batch_at, rng): the decorated step's call
        self._entry = None       # (frame, shallow copy of its locals, rng): the with block's start

    # --------------------------------------------------------------- protocol
    def __enter__(self):
        if self._step_call is None and self.trial != "model" and not _state["captured"]:
            frame = sys._getframe(1)
            # A shallow copy of what the block starts from (rebinding inside it
            # is undone): a function's locals, or at a script's top level the
            # globals the block reads.
            self._entry = (frame, _entry_values(frame), _step.rng_snapshot())
        return self

    def __exit__(self, exc_type, exc, tb):
        entry, self._entry = self._entry, None  # no frame outlives the step
        if exc_type is None:
            _state["completed"] += 1
            if self.step is not None:
                _state["last_completed_step"] = self.step
            return False
        if not issubclass(exc_type, Exception) or _state["captured"]:
            return False  # KeyboardInterrupt, SystemExit, or a later failure: not ours
        _state["captured"] = True
        device_assert = is_device_assert(exc)
        try:
            info = self._write(exc, tb, device_assert, entry)
        except Exception as write_error:  # never hide the user's error behind ours
            sys.stderr.write("minrepro_capture: could not write the case to %s: %s: %s\n"
                             % (self.out_dir, type(write_error).__name__, write_error))
            info = None
        if info is not None:
            where = info.case_file or info.error_file
            at = "" if self.step is None else " at step %s" % self.step
            sys.stderr.write("minrepro_capture: wrote %s (%s%s)\n" % (where, exc_type.__name__, at))
            if info.test_run is not None:
                sys.stderr.write("minrepro_capture: test run of the case: %s (%s)\n" % (
                    "fails the same way" if info.test_run.same else "DOES NOT fail the same way, see "
                    + str(info.error_file), info.test_run.detail))
            if info.case_file and (info.test_run is None or info.test_run.same):
                for note in info.notes:
                    sys.stderr.write("minrepro_capture: note: %s\n" % note)
                sys.stderr.write("minrepro_capture: reduce it with: minrepro shrink --config %s\n" % info.case_file)
            elif info.case_file:
                sys.stderr.write("minrepro_capture: fix what %s says, then reduce it with: minrepro shrink --config %s\n"
                                 % (info.error_file, info.case_file))
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
            batch, batch_at = self.batch, None
            if batch is None:
                batch_at = "batch" if "batch" in kwargs else next(
                    (i for i, a in enumerate(args) if isinstance(a, (dict, tuple, list))), None)
            else:
                batch_at = next((i for i, a in enumerate(args) if a is batch), None)
                if batch_at is None:
                    batch_at = next((k for k, v in kwargs.items() if v is batch), None)
            if batch_at is not None:
                batch = kwargs[batch_at] if isinstance(batch_at, str) else args[batch_at]
            step = self.step if self.step is not None else kwargs.get("step")
            bound = capture(self.out_dir, model=self.model, loss=self.loss, ignore_index=self.ignore_index,
                            step=step, batch=batch, sample_ids=kwargs.get("sample_ids", self.sample_ids),
                            input_key=self.input_key, target_key=self.target_key, submodule=self.submodule,
                            command=self.command, last_batch=self.last_batch, dataloader=self.dataloader,
                            batch_index=kwargs.get("batch_index", self.batch_index), branches=self.branches,
                            last_completed_step=self.last_completed_step, timeout=self.timeout, trial=self.trial,
                            test_run=self.test_run)
            if not _state["captured"] and batch_at is not None:
                bound._step_call = (fn, args, kwargs, batch_at, _step.rng_snapshot())
            with bound:
                return fn(*args, **kwargs)

        return wrapper

    # ----------------------------------------------------------------- writing
    def _write(self, exc, tb, device_assert, entry):
        global last_capture
        if self.batch is None:
            raise ValueError("no batch was given to capture()")
        out_dir = _claim_directory(os.path.abspath(self.out_dir))
        problems = []
        batch = _Batch(self.batch, self.input_key, self.target_key, self.sample_ids, problems)
        trial = self._trial(out_dir, batch, tb, entry, problems)
        # The built-in harness takes named tensors; a step or a command, the batch as the step had it.
        harness = trial is not None and trial.kind in ("harness", "exported")
        _model_slice.save_whole(lambda path: torch.save(batch.flat() if harness else batch.saved.saved, path),
                                os.path.join(out_dir, "batch.pt"))
        test = None
        if trial is not None and trial.argv is not None and self.test_run:
            test = _testrun.run(trial.argv, out_dir, self.timeout, type(exc).__name__, _model_slice.first_message(exc))
            if not test.same:
                pinned = self._family(exc, batch.saved.devices, trial, test) is not None
                problems.append(_test_run_problem(test, exc, pinned))
        text = self._case_text(exc, tb, batch, trial, test)
        case_file = None
        if trial is None:
            with open(os.path.join(out_dir, "case.yaml.draft"), "w") as f:
                f.write(text)
        else:
            case_file = os.path.join(out_dir, "case.yaml")
            with open(case_file + ".tmp", "w") as f:
                f.write(text)
            os.replace(case_file + ".tmp", case_file)
        error_file = None
        if problems:
            error_file = os.path.join(out_dir, "CAPTURE-ERROR.txt")
            with open(error_file, "w") as f:
                f.write("minrepro_capture: %s\n" % ("the case is incomplete: no trial could be written"
                                                    if case_file is None else "notes on the captured case"))
                for p in problems:
                    f.write("- %s\n" % p)
        last_capture = CaptureInfo(out_dir, case_file, error_file, device_assert, test, problems)
        return last_capture

    def _case_text(self, exc, tb, batch, trial, test):
        lines = ["# Written by minrepro_capture at the first failure; reduce with:",
                 "#   minrepro shrink --config case.yaml",
                 "# No samples section: minrepro infers the samples, ids, lengths and sequence axes",
                 "# from batch.pt when it opens this case, as `minrepro init --batch batch.pt` shows.",
                 "batch: batch.pt"]
        reducers = None  # the default pipeline, as for a case minrepro infers
        if trial is not None:
            lines += trial.lines
            if any(line.startswith("  switches:") for line in trial.lines):
                # The same passes, branches first: an augmentation switched off
                # makes later candidates draw no random numbers.
                reducers = ["branches", "samples", "lengths", "values"]
        else:
            lines += ["# trial: no trial could be written: see CAPTURE-ERROR.txt",
                      "#   command: [/usr/bin/python3, \"{case_dir}/step.py\", \"{batch}\"]"]
        family = self._family(exc, batch.saved.devices, trial, test)
        if family:
            lines += ["failure:", "  family: %s" % family]
        if reducers:
            lines += ["reducers: [%s]" % ", ".join(reducers)]
        lines += ["output: repro.tar.gz", "context:"]
        context = self._context(exc, tb, batch, trial, test)
        lines += ["  %s: %s" % (key, _model_slice.yaml_str(value)) for key, value in context]
        return "\n".join(lines) + "\n"

    def _trial(self, out_dir, batch, tb, entry, problems):
        """The Trial, or None when none can be written. The user's command when
        one is given; else the step itself (the decorated function or the with
        block); else, or with trial="model", the model slice."""
        if self.command is not None:
            note = "the user's command (command= given%s)" % ("; the model is not used" if self.model else "")
            return _model_slice.Trial("command", _model_slice.command_lines(self.command, self.timeout), note,
                                      self.command)
        if self.trial != "model":
            try:
                return self._step_trial(out_dir, batch, tb, entry, problems)
            except _step.StepNotSaved as why:
                problems.append("the step itself could not be made the trial: %s%s" % (
                    why, "" if self.trial == "step" or self.model is None else "; the model slice is the trial instead"))
                if self.trial == "step":
                    return None
        if self.model is None:
            problems.append("no model was given, so no model slice either: pass model= (trial=\"model\") or "
                            "command=[python, script, '{batch}'] to capture(), or fill in the trial in "
                            "case.yaml.draft and rename it to case.yaml")
            return None
        failed = []
        trial = _model_slice.model_trial(self, out_dir, batch.flat(), failed)
        if trial is None:
            participle = {"script": "scripted", "export": "exported", "trace": "traced"}
            problems.append("model.pt not written: the model could not be %s, and no command=[...] was given" % (
                ", nor ".join("%s (%s)" % (participle[what], reason) for what, reason in failed)))
        return trial

    def _step_trial(self, out_dir, batch, tb, entry, problems):
        if self._step_call is not None:
            fn, args, kwargs, batch_at, rng = self._step_call
            record = _step.function_record(fn, args, kwargs, batch_at, rng, batch.saved.others)
            where = "the decorated function %s.%s" % (fn.__module__, fn.__qualname__)
        elif entry is not None and tb is not None:
            frame, entry_locals, rng = entry
            while tb is not None and tb.tb_frame is not frame:
                tb = tb.tb_next
            if tb is None:
                raise _step.StepNotSaved("the failure's traceback does not pass through the with block")
            record = _step.block_record(frame, entry_locals, tb.tb_lineno, batch.given, batch.saved, rng,
                                        batch.saved.others)
            where = "the with block at %s:%d in %s" % (os.path.basename(record.user_file), record.with_line,
                                                      frame.f_code.co_name)
        else:
            raise _step.StepNotSaved("the step was not seen starting (capture was neither entered as a with block "
                                     "nor called as a decorator with the batch)")
        record.meta["layout"] = batch.saved.layout()
        problems.extend(record.notes)
        switches = [path for path, on in self.branches.items() if on is True and record.switchable(path)]
        _step.write(record, out_dir, switches)
        argv = [sys.executable, "-u", "{case_dir}/captured_step.py", "{batch}", record.user_file, record.meta["module"]]
        extra = []
        if switches:
            extra = ["  switches:"] + ["    - {name: %s, off_args: [\"--off\", %s]}" % (
                _model_slice.yaml_str(p), _model_slice.yaml_str(p)) for p in switches]
        return _model_slice.Trial("step", _model_slice.command_lines(argv, self.timeout, extra),
                                  "the step itself: " + where, argv)

    def _family(self, exc, devices, trial, test):
        """failure.family where the trial runs as the step did: a trial that
        was test-run (when the run failed another way, the family holds
        shrink to the step's failure: exit 3, not a reduction of the other
        one), or the built-in harness, which runs the model as captured;
        and the batch ran on the CPU (a CUDA device assert becomes an
        IndexError on the CPU)."""
        certain = trial is not None and (test is not None or trial.kind in ("harness", "exported"))
        if not certain or any(d != "cpu" for d in devices.values()):
            return None
        name = type(exc).__name__
        if name == "IndexError":
            return "index-error"
        if name in ("ValueError", "TypeError"):
            return "value-error"
        return None

    def _context(self, exc, tb, batch, trial, test):
        devices = batch.saved.devices
        ctx = [("exception", type(exc).__name__), ("message", _model_slice.first_message(exc))]
        frames = traceback.extract_tb(tb) if tb is not None else []
        if frames:
            last = frames[-1]
            ctx.append(("raised_at", "%s:%d in %s" % (os.path.basename(last.filename), last.lineno, last.name)))
        ctx.append(("step", "unknown (not given)" if self.step is None else self.step))
        last_done = self.last_completed_step
        if last_done is None:
            last_done = _state["last_completed_step"]
        if last_done is None and _state["completed"]:
            # Steps completed without numbers (a decorator given no step): "none" would say this was the first.
            last_done = "unknown (not given; %d steps completed before this one)" % _state["completed"]
        ctx.append(("last_completed_step", "none" if last_done is None else last_done))
        ctx.append(("revision", _git_revision() or "unknown (not in a git repository)"))
        ctx.append(("python", platform.python_version()))
        ctx.append(("pytorch", torch.__version__))
        used = sorted({d.split(":")[0] for d in devices.values()})
        ctx.append(("backend", ", ".join(backend_of(d) for d in used) or "cpu"))
        ctx.append(("torch_build", "rocm %s" % torch.version.hip if getattr(torch.version, "hip", None)
                    else ("cuda %s" % torch.version.cuda if torch.version.cuda else "cpu only")))
        ctx.append(("devices", ", ".join(_device_names(sorted(set(devices.values()))))))
        ctx.append(("batch_size", batch.n))
        last_batch = self.last_batch
        if last_batch is None:
            last_batch = _infer_last_batch(self.dataloader, self.batch_index)
        ctx.append(("last_batch", "unknown" if last_batch is None
                    else ("yes (incomplete)" if last_batch else "no")))
        ctx.append(("sample_ids", "given (sample_ids=)" if batch.saved.added_keys
                    else "the batch's own, or positions in the batch (minrepro infers which)"))
        for path, t, original in batch.saved.tensors[:64]:
            ctx.append(("tensor_" + _batch.display_path(path), "%s %s on %s" % (
                str(t.dtype).replace("torch.", ""), list(t.shape), original.device)))
        if batch.saved.others:
            ctx.append(("not_tensors", ", ".join(_batch.display_path(json.loads(p)) for p in batch.saved.others)))
        ctx.append(("trial", trial.note if trial is not None else "none could be written"))
        if test is not None:
            ctx.append(("test_run", "%s (%s) in %.1f s, a fresh process in an empty directory" % (
                {"same": "failed the same way", "different": "failed another way", "passed": "did not fail",
                 "timeout": "timed out"}[test.verdict], test.detail, test.seconds)))
        if self.branches:
            ctx.append(("branches", ", ".join("%s=%s" % (k, v) for k, v in self.branches.items())))
        return [(k, "" if v is None else v) for k, v in ctx]


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
