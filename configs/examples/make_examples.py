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
"""
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
    with open(path, "w") as f:
        f.write(text)


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
reducers: [samples]
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


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else HERE
    for name, make in [("class4", make_class4), ("pair", make_pair), ("command", make_command),
                       ("flaky", make_flaky)]:
        out = os.path.join(root, name)
        os.makedirs(out, exist_ok=True)
        make(out)
        print("wrote", out)


if __name__ == "__main__":
    main()
