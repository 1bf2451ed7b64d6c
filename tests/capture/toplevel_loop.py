"""A training script the way most are written: the loop at the module's top
level, no main(), no `if __name__ == "__main__":`, the model a class of the
script. Its step is captured by value (minrepro_capture/_by_value.py): the
trial never imports this file, which would train again. Sample 5 of step 2
holds a token one past the embedding table.

Usage: python toplevel_loop.py CASE_DIR
(tests/capture/notebook_cell.py runs this same text as a notebook cell.)"""
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
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("step", step, "loss %.3f" % loss.item(), flush=True)
