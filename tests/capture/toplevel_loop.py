"""A training script the way most are written: the loop at the module's top
level, no main(), no `if __name__ == "__main__":`, the model a class of the
script. Its step is captured by value (minrepro_capture/_by_value.py): the
trial never imports this file, which would train again. Sample 5 of step 2
holds a token one past the embedding table.

It reads a setting from toplevel_loop.json beside it twice, as scripts do:
through HERE, which a function of the script reads (saved by value), and
through __file__ in the block itself (saved with the block's variables).
Both name the file's place on the capturing machine: the archive's run
must read its own copy, beside its copy of the script.

Usage: python toplevel_loop.py CASE_DIR
(tests/capture/notebook_cell.py runs this same text as a notebook cell,
which has no __file__ and reads no file.)"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

import minrepro_capture

VOCAB, CLASSES = 50, 3
out_dir = sys.argv[1] if len(sys.argv) > 1 else "case"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.out = nn.Linear(8, CLASSES)

    def forward(self, x):
        return self.out(self.embed(x).mean(1))


HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else None


def label_smoothing():
    if HERE is None:
        return 0.0
    with open(os.path.join(HERE, "toplevel_loop.json")) as f:
        return json.load(f)["label_smoothing"]


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randint(0, VOCAB, (16, 7), generator=g)
    if step == 2:
        x[5, 3] = VOCAB
    return x, torch.randint(0, CLASSES, (16,), generator=g)


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    batch = make_batch(step)
    with minrepro_capture.capture(out_dir, step=step, batch=batch):
        x, y = batch
        smoothing = label_smoothing()
        if HERE is not None:
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "toplevel_loop.json")) as f:
                smoothing = max(smoothing, json.load(f)["label_smoothing"])
        loss = F.cross_entropy(model(x), y, label_smoothing=smoothing)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("step", step, "loss %.3f" % loss.item(), flush=True)
