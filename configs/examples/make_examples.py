#!/usr/bin/python3
"""Generates minrepro's bundled example cases, reproducibly (fixed seeds).

Usage: /usr/bin/python3 configs/examples/make_examples.py [OUT_DIR]
OUT_DIR defaults to this script's directory. Each example is a directory
with case.yaml, batch.pt and (for the built-in harness) model.pt.

  class4   the guide's worked example: a 4-class classifier, 512 samples with
           ignore_index=-100 entries and one target 4 -> one sample left,
           index-error in nll_loss, "Target 4 is out of bounds."
  pair     fails only when two marked samples are in the batch together
           (an embedding indexed by the number of marked samples) -> those two
  command  a user command (a Python training step taking the batch path),
           the same class-4 bug -> one sample left
  flaky    a user command that fails on one sample (id 30045) only about
           3 times in 10, seeded per trial -> that sample, with the rate
  seqlen   positions past 512 of a learned position table: fails for any
           sequence of 513 or more -> one sample, window 513, that sample's
           own length 513 (the batch is padded to its longest, and so is
           each candidate; mask and lengths kept consistent), tokens trivial
  exactlen a length-bucketed sampler whose bucket 300 is corrupt: fails at
           exactly length 300 -> the length stays 300, values trivial
  strided  view() on a non-contiguous (transposed) input -> 1 sample, window
           2 (at length 1 the input would be contiguous: rejected without a trial)
  half     a float16 whitening layer on CPU: its Cholesky factor has no Half
           kernel there ("cholesky_cpu" not implemented for 'Half', torch 1.13
           and 2.x alike) -> 1 sample, still float16, values 0
  augment  a pad-to-520 augmentation overruns a 512-position table; normalize
           and noise are not needed -> only the pad branch stays on
  image    64 RGB images in [0, 1] and one that was never scaled (a pixel of
           255): a 256-entry gamma table indexed by pixel * 255 -> that image,
           "index out of range in self"
  audio    48 clips of 2000 samples in [-1, 1] and one with a spike of 3.5:
           an 8-bit mu-law table indexed by the quantised amplitude -> that clip
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
N = 512
FEATURES = 8
CLASSES = 4
BAD_SAMPLE = 313       # index of the sample whose target is 4
PAIR = (77, 402)       # the two samples that fail only together


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, CLASSES))

    def forward(self, x):
        return self.body(x)


class MarkedCounter(torch.nn.Module):
    """Looks up an embedding row by the number of marked samples (feature 0 > 5):
    rows exist for 0 and 1 marked samples only, so two marked samples fail."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(2, CLASSES)

    def forward(self, x):
        marked = (x[:, 0] > 5.0).sum().reshape(1)
        return self.table(marked).expand(x.shape[0], 4)


def class4_batch(gen):
    inputs = torch.randn(N, FEATURES, generator=gen)
    targets = torch.randint(0, CLASSES, (N,), generator=gen)
    ignored = torch.rand(N, generator=gen) < 0.1
    targets[ignored] = -100          # ignore_index entries, valid
    targets[BAD_SAMPLE] = 4          # the bug: a fifth class in a 4-class problem
    ids = torch.arange(N, dtype=torch.int64) + 10000
    return {"input": inputs, "target": targets, "sample_id": ids}


def write_case(path, text):
    # Command trials run with the Python that made the case (the one whose
    # torch wrote batch.pt): /usr/bin/python3 for Debian's 1.13, a venv's for 2.x.
    with open(path, "w") as f:
        f.write(text.replace('"/usr/bin/python3"', json.dumps(sys.executable)))


def make_class4(out):
    gen = torch.Generator().manual_seed(4)
    torch.manual_seed(4)
    model = torch.jit.script(Classifier().eval())
    torch.jit.save(model, os.path.join(out, "model.pt"))
    torch.save(class4_batch(gen), os.path.join(out, "batch.pt"))
    write_case(os.path.join(out, "case.yaml"), """\
# The guide's worked example: class 4 in a four-class problem.
batch: batch.pt
samples:
  tensors: {input: 0, target: 0}
  ids: sample_id
trial:
  harness:
    model: model.pt
    input: input
    target: target
    loss: cross_entropy
    ignore_index: -100
  timeout: 60
failure:
  family: index-error
  operator: nll_loss
# No `reducers`: the default pipeline (configs/pipelines/default.yaml), so
# the values pass leaves the offending target and trivial data elsewhere.
output: repro.tar.gz
""")


def make_pair(out):
    gen = torch.Generator().manual_seed(2)
    torch.manual_seed(2)
    torch.jit.save(torch.jit.script(MarkedCounter().eval()), os.path.join(out, "model.pt"))
    inputs = torch.randn(N, FEATURES, generator=gen)
    inputs[list(PAIR), 0] = 9.0
    targets = torch.randint(0, CLASSES, (N,), generator=gen)
    ids = torch.arange(N, dtype=torch.int64) + 20000
    torch.save({"input": inputs, "target": targets, "sample_id": ids}, os.path.join(out, "batch.pt"))
    write_case(os.path.join(out, "case.yaml"), """\
# Fails only when samples 77 and 402 are in the batch together.
batch: batch.pt
samples:
  tensors: {input: 0, target: 0}
  ids: sample_id
trial:
  harness:
    model: model.pt
    input: input
    target: target
  timeout: 60
reducers: [samples]
output: repro.tar.gz
""")


STEP_PY = '''\
"""A user's training step: loads the batch given on the command line and
runs one forward and loss, as the training loop would."""
import sys

import torch
import torch.nn.functional as F

batch = torch.load(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
logits = model(batch["input"])
loss = F.cross_entropy(logits, batch["target"], ignore_index=-100)
loss.backward()
print("step ok, loss", loss.item())
'''


def make_command(out):
    gen = torch.Generator().manual_seed(4)
    torch.save(class4_batch(gen), os.path.join(out, "batch.pt"))
    write_case(os.path.join(out, "step.py"), STEP_PY)
    write_case(os.path.join(out, "case.yaml"), """\
# A user command instead of the built-in harness: never run through a shell.
batch: batch.pt
samples:
  tensors: {input: 0, target: 0}
  ids: sample_id
trial:
  command: ["/usr/bin/python3", "-u", "{case_dir}/step.py", "{batch}"]
  timeout: 120
failure:
  family: index-error
reducers: [samples]
output: repro.tar.gz
""")


FLAKY_STEP_PY = '''\
"""A training step with a flaky bug: the bad target only reaches the loss
when a random augmentation (seeded per trial by minrepro's MINREPRO_TRIAL)
keeps it, about 3 times in 10."""
import os
import random
import sys

import torch
import torch.nn.functional as F

batch = torch.load(sys.argv[1])
rng = random.Random(int(os.environ.get("MINREPRO_TRIAL", "0")) * 7919 + 17)
targets = batch["target"].clone()
if rng.random() >= 0.3:
    targets[targets >= 4] = -100     # the augmentation that usually hides the bug
logits = torch.zeros(len(targets), 4)
loss = F.cross_entropy(logits, targets, ignore_index=-100)
print("step ok, loss", float(loss))
'''


def make_flaky(out):
    gen = torch.Generator().manual_seed(5)
    n = 64
    targets = torch.randint(0, CLASSES, (n,), generator=gen)
    targets[45] = 4
    torch.save({"input": torch.randn(n, FEATURES, generator=gen), "target": targets,
                "sample_id": torch.arange(n, dtype=torch.int64) + 30000}, os.path.join(out, "batch.pt"))
    write_case(os.path.join(out, "step.py"), FLAKY_STEP_PY)
    write_case(os.path.join(out, "case.yaml"), """\
# Fails on sample 30045 only about 3 times in 10: minrepro estimates the
# rate first and rejects a candidate only after a long enough run of passes.
batch: batch.pt
samples:
  tensors: {input: 0, target: 0}
  ids: sample_id
trial:
  command: ["/usr/bin/python3", "-u", "{case_dir}/step.py", "{batch}"]
  timeout: 120
failure:
  family: index-error
flaky:
  alpha: 0.001
reducers: [samples]
output: repro.tar.gz
""")


class Positions(torch.nn.Module):
    """Token embeddings plus a learned position table of 512 rows: a longer
    sequence indexes past the table (index out of range in self)."""

    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(1000, 8)
        self.positions = torch.nn.Embedding(512, 8)

    def forward(self, tokens):
        pos = torch.arange(tokens.size(1)).unsqueeze(0)
        return (self.tokens(tokens) + self.positions(pos)).mean(1)


class BucketSampler(torch.nn.Module):
    """Samples one position per sequence with weights looked up by the
    sequence length; the bucket for length 300 holds a corrupt weight."""

    def __init__(self):
        super().__init__()
        weights = torch.ones(1024)
        weights[300] = -1.0
        self.register_buffer("weights", weights)

    def forward(self, x):
        w = self.weights[x.size(1)]
        probs = torch.softmax(x.mean(-1), -1) * w
        pick = torch.multinomial(probs, 1)
        return x.gather(1, pick.unsqueeze(-1).expand(-1, -1, x.size(2))).squeeze(1)


class Flatten(torch.nn.Module):
    """view() needs a compatible layout: a transposed batch fails."""

    def forward(self, x):
        return x.view(x.size(0), -1).sum(1, keepdim=True)


class HalfWhitening(torch.nn.Module):
    """Whitens float16 features with the Cholesky factor of their second
    moment: elementwise float16 works on the CPU, the factorisation does not."""

    def forward(self, x):
        moment = (x.unsqueeze(2) * x.unsqueeze(1)).mean(0)
        moment = moment + torch.eye(x.shape[1], dtype=x.dtype)
        factor = torch.linalg.cholesky(moment)
        return (x.unsqueeze(1) * factor).sum(2)


class PositionTable(torch.nn.Module):
    """Adds a fixed 512-position table: a longer sequence does not broadcast."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.zeros(512, 4))

    def forward(self, x):
        return (x + self.table[: x.size(1)]).mean(1)


def save_case(out, model, batch, comment, samples, model_input, extra="", transforms=""):
    """Writes model.pt, batch.pt and a case.yaml for the built-in harness with
    a deterministic failure (flakiness handling left at its default, which
    charges for flakiness only on evidence of it); `extra` holds more top-level
    keys (sequence, failure), `transforms` the harness's transform list."""
    torch.jit.save(torch.jit.script(model.eval()), os.path.join(out, "model.pt"))
    torch.save(batch, os.path.join(out, "batch.pt"))
    write_case(os.path.join(out, "case.yaml"), f"""\
# {comment}
batch: batch.pt
samples:
  tensors: {samples}
  ids: sample_id
{extra}trial:
  harness:
    model: model.pt
    input: {model_input}
{transforms}  timeout: 60
output: repro.tar.gz
""")


def make_seqlen(out):
    gen = torch.Generator().manual_seed(7)
    torch.manual_seed(7)
    n, length = 16, 600
    lengths = torch.randint(100, length + 1, (n,), generator=gen)
    lengths[3] = length
    positions = torch.arange(length).unsqueeze(0)
    mask = positions < lengths.unsqueeze(1)
    tokens = torch.randint(1, 1000, (n, length), generator=gen) * mask
    batch = {"tokens": tokens, "mask": mask, "lengths": lengths, "sample_id": torch.arange(n) + 40000}
    save_case(out, Positions(), batch, "Sequences longer than the 512-row position table fail.",
              "{tokens: 0, mask: 0}", "tokens", extra="""\
sequence:
  tensors: {tokens: 1, mask: 1}
  padding: {tokens: 0, mask: 0}
  lengths: lengths
failure:
  family: index-error
""")


def make_exactlen(out):
    gen = torch.Generator().manual_seed(8)
    batch = {"x": torch.randn(8, 300, 4, generator=gen), "sample_id": torch.arange(8) + 50000}
    save_case(out, BucketSampler(), batch, "Fails only at sequence length 300 (a corrupt bucket weight).",
              "{x: 0}", "x", extra="sequence:\n  tensors: {x: 1}\n")


def make_strided(out):
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(8, 6, 40, generator=gen).transpose(1, 2)   # [8, 40, 6], not contiguous
    batch = {"x": x, "sample_id": torch.arange(8) + 60000}
    save_case(out, Flatten(), batch, "view() on a transposed input: fails only while it is not contiguous.",
              "{x: 0}", "x", extra="sequence:\n  tensors: {x: 1}\n")


def make_half(out):
    gen = torch.Generator().manual_seed(10)
    torch.manual_seed(10)
    batch = {"input": torch.randn(32, FEATURES, generator=gen).half(), "sample_id": torch.arange(32) + 70000}
    save_case(out, HalfWhitening(), batch,
              "A float16 whitening layer on CPU: no Half kernel for its Cholesky factor there.",
              "{input: 0}", "input", extra="failure:\n  family: op-unavailable\n")


class GammaTable(torch.nn.Module):
    """Looks each pixel up in a 256-entry gamma table: a pixel above 1.0
    (an image that was never scaled to [0, 1]) indexes past its end."""

    def __init__(self):
        super().__init__()
        self.gamma = torch.nn.Embedding(256, 1)
        self.head = torch.nn.Linear(3, CLASSES)

    def forward(self, x):
        index = (x * 255).round().long()
        corrected = self.gamma(index.flatten(1)).squeeze(-1).reshape(x.shape)
        return self.head(corrected.mean(dim=(2, 3)))


class MuLawTable(torch.nn.Module):
    """Quantises each amplitude to 8 bits and looks it up: an amplitude
    outside [-1, 1] (a clipping spike) indexes past the table."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(256, 1)
        self.head = torch.nn.Linear(1, CLASSES)

    def forward(self, x):
        index = ((x + 1) / 2 * 255).round().long()
        return self.head(self.table(index).mean(dim=1))


def make_image(out):
    gen = torch.Generator().manual_seed(12)
    torch.manual_seed(12)
    images = torch.rand(64, 3, 16, 16, generator=gen)
    images[41] = (images[41] * 255).round()            # the one image left unscaled
    batch = {"image": images, "label": torch.randint(0, CLASSES, (64,), generator=gen),
             "sample_id": torch.arange(64) + 90000}
    save_case(out, GammaTable(), batch, "An image left unscaled (pixels up to 255) overruns a 256-entry gamma table.",
              "{image: 0, label: 0}", "image", extra="failure:\n  family: index-error\n")


def make_audio(out):
    gen = torch.Generator().manual_seed(13)
    torch.manual_seed(13)
    t = torch.linspace(0, 1, 2000)
    freqs = torch.rand(48, 1, generator=gen) * 40 + 5
    clips = 0.8 * torch.sin(2 * torch.pi * freqs * t)
    clips[17, 1200:1210] = 3.5                          # a clipping spike
    batch = {"clip": clips, "sample_id": torch.arange(48) + 95000}
    save_case(out, MuLawTable(), batch, "A clipping spike (amplitude 3.5) overruns an 8-bit mu-law table.",
              "{clip: 0}", "clip", extra="failure:\n  family: index-error\n")


def make_augment(out):
    gen = torch.Generator().manual_seed(11)
    batch = {"x": torch.randn(16, 128, 4, generator=gen), "sample_id": torch.arange(16) + 80000}
    save_case(out, PositionTable(), batch,
              "Padding every sequence to 520 overruns a 512-position table; the other augmentations are innocent.",
              "{x: 0}", "x", extra="sequence:\n  tensors: {x: 1}\n", transforms="""\
    transforms:
      - {type: normalize, tensor: x, mean: 0.5, std: 0.25}
      - {type: noise, tensor: x, std: 0.1}
      - {type: pad, tensor: x, axis: 1, length: 520, value: 0}
""")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else HERE
    for name, make in [("class4", make_class4), ("pair", make_pair), ("command", make_command),
                       ("flaky", make_flaky), ("seqlen", make_seqlen), ("exactlen", make_exactlen),
                       ("strided", make_strided), ("half", make_half), ("augment", make_augment),
                       ("image", make_image), ("audio", make_audio)]:
        out = os.path.join(root, name)
        os.makedirs(out, exist_ok=True)
        make(out)
        print("wrote", out)


if __name__ == "__main__":
    main()
