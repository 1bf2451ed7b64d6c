"""The model slice as the trial (capture(..., trial="model"), and the
fallback when the step itself cannot be saved): the model alone, run by
minrepro's built-in harness on batch[input] with the loss against
batch[target].

In order: torch.jit.script (model.pt, the built-in harness); with torch
2.x, torch.export (model.pt2 and exported_step.py, the harness's step in
Python); torch.jit.trace (model.pt). It fits a model whose forward takes
one tensor; a step that does more (several inputs, its own loss) is what
the step trial is for."""
import copy
import os
import sys

import torch

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


class Trial:
    """A trial section for case.yaml: its lines, a note for the context, and
    the command a test run executes (None for the built-in harness, which
    runs inside minrepro)."""

    def __init__(self, kind, lines, note, argv=None):
        self.kind = kind    # "step", "harness", "exported" or "command"
        self.lines = lines
        self.note = note
        self.argv = argv


def yaml_str(value):
    """A double-quoted YAML scalar."""
    out = []
    for ch in str(value):
        if ch in "\\\"":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def command_lines(argv, timeout, extra=()):
    return ["trial:", "  command: [%s]" % ", ".join(yaml_str(c) for c in argv), "  timeout: %s" % timeout] + list(extra)


def save_whole(save, path):
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


def first_message(exc):
    for line in str(exc).strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _device_of(module):
    for p in module.parameters():
        return str(p.device.type)
    return "cpu"


def model_trial(options, out_dir, tensors, failed):
    """The model slice's Trial, or None with `failed` saying why each way failed."""
    module = options.model
    if options.submodule:
        module = options.model.get_submodule(options.submodule)
    if _device_of(module) != "cpu":
        # A CPU copy: scripting shares parameters, and .cpu() on it would move the user's model.
        module = copy.deepcopy(module).cpu()
    mode = "training" if module.training else "eval"

    def why(error):
        return "%s: %s" % (type(error).__name__, first_message(error))
    try:
        save_whole(lambda path: torch.jit.save(torch.jit.script(module), path), os.path.join(out_dir, "model.pt"))
        return Trial("harness", _harness_lines(options, tensors), "torch.jit.script (%s mode)" % mode)
    except Exception as error:
        failed.append(("script", why(error)))
    if hasattr(torch, "export") and hasattr(torch.export, "Dim"):
        try:
            return _export_trial(options, out_dir, module, tensors, failed[0][1])
        except Exception as error:
            failed.append(("export", why(error)))
    try:
        save_whole(lambda path: torch.jit.save(torch.jit.trace(module, tensors[options.input_key]), path),
                   os.path.join(out_dir, "model.pt"))
        return Trial("harness", _harness_lines(options, tensors), "torch.jit.trace (%s) (%s mode)" % (
            "; ".join("%s failed: %s" % f for f in failed), mode))
    except Exception as error:
        failed.append(("trace", why(error)))
    return None


def _harness_lines(options, tensors):
    lines = ["trial:", "  harness:", "    model: model.pt", "    input: %s" % yaml_str(options.input_key)]
    if options.loss != "none" and options.target_key in tensors:
        lines += ["    target: %s" % yaml_str(options.target_key), "    loss: %s" % options.loss,
                  "    ignore_index: %d" % options.ignore_index]
    return lines + ["  timeout: %s" % options.timeout]


def _export_trial(options, out_dir, module, tensors, script_failure):
    """torch 2.x: the model as a torch.export program (model.pt2) and
    exported_step.py, the built-in harness's step in Python (eval mode,
    no gradients, the loss against the target), as the trial command.
    Why before trace: trace keeps one path through the Python code
    silently, for the example's values; export refuses data-dependent
    branches and turns shape-dependent ones into guards that fail loudly
    on a batch that would take another path. Every dimension of the input
    is exported as Dim.AUTO, so the reducers' smaller batches and shorter
    sequences run the same program."""
    x = tensors[options.input_key]
    model = copy.deepcopy(module).eval()
    auto = {d: torch.export.Dim.AUTO for d in range(x.dim())}
    program = torch.export.export(model, (x,), dynamic_shapes=(auto,))
    outputs = program.graph_signature.user_outputs
    if len(outputs) != 1 or not program.call_spec.out_spec.is_leaf():
        raise TypeError("the exported model returns %d values, not one tensor" % len(outputs))
    torch.export.save(program, os.path.join(out_dir, "model.pt2"))
    loss = options.loss if options.loss != "none" and options.target_key in tensors else "none"
    with open(os.path.join(out_dir, "exported_step.py"), "w") as f:
        f.write(_EXPORTED_STEP.replace("@INPUT@", repr(options.input_key))
                .replace("@TARGET@", repr(options.target_key)).replace("@LOSS@", repr(loss))
                .replace("@IGNORE_INDEX@", str(int(options.ignore_index))))
    argv = [sys.executable, "-u", "{case_dir}/exported_step.py", "{batch}"]
    return Trial("exported", command_lines(argv, options.timeout),
                 "torch.export (script failed: %s) (run in eval mode, as the harness runs)" % script_failure, argv)
