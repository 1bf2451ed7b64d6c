"""A sequence tagger's training loop wrapped in minrepro_capture: the model's
forward takes (tokens, lengths), the DataLoader pads with a collate of its
own (tokens 0, tags -100, a lengths tensor), an optional augmentation
(token dropout) draws random numbers, AdamW updates the weights, and the
loss is cross-entropy with ignore_index. Sample 1017 holds token 50, one
past the embedding table: the step that draws it (step 3) raises IndexError.

Usage: python tagger_loop.py CASE_DIR [MODE]
MODE: "with" (default: the with-block form inside main()), "decorator"
(a decorated module-level step), "decorator-name" (the same decorator
bound to a name first, as a script that captures only when asked does), "unsaved" (the block's loss is a lambda
pickle refuses: the model slice is not possible either, so no case),
"cwd-file" (the block reads a file relative to the directory training
runs in: the test run, in an empty directory, fails another way, and
capture says so), "meta" (the with-block form, each batch also holding
per-sample metadata with a Python float, as an image pipeline's scale
factor: PyTorch 1.13's weights-only reader refuses a float)."""
import json
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

import minrepro_capture

VOCAB, TAGS, N, BAD = 50, 5, 64, 17


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16, padding_idx=0)
        self.out = nn.Linear(16, TAGS)

    def forward(self, tokens, lengths):
        mask = torch.arange(tokens.size(1)).unsqueeze(0) < lengths.unsqueeze(1)
        return self.out(self.embed(tokens) * mask.unsqueeze(-1))


class Sentences(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.items = []
        for i in range(N):
            n = int(torch.randint(3, 12, (1,), generator=g))
            tokens = torch.randint(1, VOCAB, (n,), generator=g)
            if i == BAD:
                tokens[1] = VOCAB
            self.items.append((tokens, torch.randint(0, TAGS, (n,), generator=g), 1000 + i))

    def __len__(self):
        return N

    def __getitem__(self, i):
        return self.items[i]


META = False


def collate(items):
    longest = max(len(t) for t, _, _ in items)
    tokens = torch.zeros(len(items), longest, dtype=torch.long)
    tags = torch.full((len(items), longest), -100, dtype=torch.long)
    for row, (t, y, _) in enumerate(items):
        tokens[row, :len(t)], tags[row, :len(y)] = t, y
    batch = {"tokens": tokens, "tags": tags, "lengths": torch.tensor([len(t) for t, _, _ in items]),
             "sample_id": torch.tensor([i for _, _, i in items])}
    if META:
        batch["meta"] = [{"file": "s%d.txt" % i, "scale": 0.5} for _, _, i in items]
    return batch


class Config:
    token_dropout = True
    label_smoothing = 0.0


def augment(tokens, lengths, cfg):
    """Token dropout: random positions of each sentence become 0 (padding)."""
    if not cfg.token_dropout:
        return tokens
    keep = torch.rand(tokens.shape) > 0.1
    return tokens * keep


def train_step(model, opt, batch, cfg):
    tokens = augment(batch["tokens"], batch["lengths"], cfg)
    logits = model(tokens, batch["lengths"])
    loss = F.cross_entropy(logits.reshape(-1, TAGS), batch["tags"].reshape(-1), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


@minrepro_capture.capture(sys.argv[1] if len(sys.argv) > 1 else "case", branches={"cfg.token_dropout": True})
def decorated_step(model, opt, batch, cfg):
    return train_step(model, opt, batch, cfg)


CAPTURING = minrepro_capture.capture(sys.argv[1] if len(sys.argv) > 1 else "case",
                                    branches={"cfg.token_dropout": True})


@CAPTURING
def named_decorator_step(model, opt, batch, cfg):
    return train_step(model, opt, batch, cfg)


def main():
    global META
    out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "with")
    META = mode == "meta"
    torch.manual_seed(0)
    loader = DataLoader(Sentences(), batch_size=8, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(0))
    model, cfg = Tagger(), Config()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scale = (lambda x: x) if mode == "unsaved" else 1.0
    for step, batch in enumerate(loader):
        if mode == "decorator":
            decorated_step(model, opt, batch, cfg)
        elif mode == "decorator-name":
            named_decorator_step(model, opt, batch, cfg)
        else:
            with minrepro_capture.capture(out, step=step, batch=batch, dataloader=loader, batch_index=step,
                                          branches={"cfg.token_dropout": True}):
                if mode == "cwd-file":
                    with open("train_config.json") as f:
                        cfg.label_smoothing = json.load(f)["label_smoothing"]
                loss = train_step(model, opt, batch, cfg)
                if mode == "unsaved":
                    loss = scale(loss)
        print("step", step, "loss %.3f" % loss if not mode.startswith("decorator") else "ok", flush=True)
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
