"""A real training loop with one mislabelled sample, wrapped in minrepro_capture.

Usage: python3 train_loop.py CASE_DIR [MODE]
MODE: "plain" (default: DataLoader over 256 samples, batch 32, sample 137 has
target 4 in a 4-class problem -> IndexError at step 4), "decorator" (the same
with the decorator form), "device-assert" (simulated CUDA device-side assert at
step 2), "unscriptable" (a model that can be neither scripted nor traced),
"unscriptable-command" (the same with command=[...]), "blocks" (a model that
cannot be scripted but can be traced and, with torch 2.x, exported). These
ask for the model slice (trial="model"); "closure" leaves the choice to
capture, which cannot save the block's step (train_step is a closure
inside main) and falls back to the model slice, saying why.
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

import minrepro_capture

N, FEATURES, CLASSES, BAD = 256, 8, 4, 137


class Synthetic(Dataset):
    def __init__(self):
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(N, FEATURES, generator=gen)
        self.y = torch.randint(0, CLASSES, (N,), generator=gen)
        self.y[BAD] = 4  # the mislabelled sample: a fifth class
        self.ids = torch.arange(N) + 9000

    def __len__(self):
        return N

    def __getitem__(self, i):
        return self.x[i], self.y[i], self.ids[i]


class Odd(torch.nn.Module):
    """Neither scriptable (variable arguments) nor traceable (a string output)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(FEATURES, CLASSES)

    def forward(self, *xs):
        return self.lin(xs[0]), "tag"


class Blocks(torch.nn.Module):
    """Not scriptable: its forward walks a Python list of block names, and
    TorchScript indexes a ModuleDict only with literals. Traceable, and
    exportable with torch 2.x (one tensor out)."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleDict({"inp": torch.nn.Linear(FEATURES, 16), "out": torch.nn.Linear(16, CLASSES)})
        self.order = ["inp", "out"]

    def forward(self, x):
        for name in self.order:
            x = self.blocks[name](x)
            if name != "out":
                x = torch.relu(x)
        return x


def main():
    out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "plain")
    start = os.getcwd()
    torch.manual_seed(0)
    loader = DataLoader(Synthetic(), batch_size=32, shuffle=False)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(), torch.nn.Linear(16, CLASSES))
    if mode.startswith("unscriptable"):
        model = Odd()
    if mode == "blocks":
        model = Blocks()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    command = ["/usr/bin/python3", "{case_dir}/step.py", "{batch}"] if mode == "unscriptable-command" else None

    def train_step(x, y):
        opt.zero_grad()
        out = model(x)
        logits = out[0] if isinstance(out, tuple) else out
        loss = F.cross_entropy(logits, y, ignore_index=-100)
        loss.backward()
        opt.step()
        return loss.item()

    @minrepro_capture.capture(out, model=model, loss="cross_entropy", ignore_index=-100, trial="model")
    def decorated_step(batch, step, sample_ids):
        return train_step(batch["input"], batch["target"])

    for step, (x, y, ids) in enumerate(loader):
        if mode == "decorator":
            decorated_step({"input": x, "target": y}, step=step, sample_ids=ids)
            continue
        with minrepro_capture.capture(out, model=model, loss="cross_entropy", ignore_index=-100, step=step,
                                      batch={"input": x, "target": y}, sample_ids=ids, input_key="input",
                                      target_key="target", dataloader=loader, batch_index=step, command=command,
                                      branches={"augment": "off"}, trial="auto" if mode == "closure" else "model"):
            if mode == "chdir" and step == 4:  # the failing step moves away first; the case stays where the loop runs
                os.makedirs(os.path.join(start, "elsewhere"), exist_ok=True)
                os.chdir(os.path.join(start, "elsewhere"))
            if mode == "device-assert" and step == 2:
                raise RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel errors might be "
                                   "asynchronously reported at some other API call")
            train_step(x, y)
        print("step", step, "ok", flush=True)
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
