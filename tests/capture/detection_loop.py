"""A detector's training script as people write one: the loop at the
script's top level, the DataLoader's batch a tuple (images, targets) where
targets is a list of per-image dicts {boxes [k, 4], labels [k], image_id}
with k varying (torchvision's detection targets), and the `for` statement
unpacking it. The batch given to capture() is rebuilt from the two names;
the block reads the names, not the batch. Image 13 (position 5 of step 1;
its image_id, 13, is the sample id) holds a box labelled CLASSES, one past
the head: cross_entropy raises IndexError "Target 5 is out of bounds.".

Usage: python detection_loop.py CASE_DIR [MODE]
MODE: "plain" (default), or "copy" (the block reads a copy of targets made
before it, which is not part of the batch: capture says so, and a shrink
that can cut no sample says why)."""
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

import minrepro_capture

CLASSES, N, BAD = 5, 24, 13
out_dir = sys.argv[1] if len(sys.argv) > 1 else "case"
mode = sys.argv[2] if len(sys.argv) > 2 else "plain"


class Boxes(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(3)
        self.items = []
        for i in range(N):
            k = int(torch.randint(1, 5, (1,), generator=g))
            labels = torch.randint(0, CLASSES, (k,), generator=g)
            if i == BAD:
                labels[-1] = CLASSES
            corner = torch.rand(k, 2, generator=g) * 24
            boxes = torch.cat([corner, corner + 4 + torch.rand(k, 2, generator=g) * 4], 1)
            target = {"boxes": boxes, "labels": labels, "image_id": torch.tensor(i)}
            self.items.append((torch.rand(3, 32, 32, generator=g), target))

    def __len__(self):
        return N

    def __getitem__(self, i):
        return self.items[i]


def collate(items):
    return torch.stack([image for image, _ in items]), [target for _, target in items]


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.cls = nn.Linear(8, CLASSES)
        self.box = nn.Linear(8, 4)


def detection_loss(model, images, targets):
    features = model.body(images)
    logits, labels, boxes, wanted = [], [], [], []
    for i, target in enumerate(targets):
        k = target["labels"].numel()
        logits.append(model.cls(features[i]).expand(k, CLASSES))
        boxes.append(model.box(features[i]).expand(k, 4))
        labels.append(target["labels"])
        wanted.append(target["boxes"])
    return F.cross_entropy(torch.cat(logits), torch.cat(labels)) + F.smooth_l1_loss(torch.cat(boxes), torch.cat(wanted))


torch.manual_seed(0)
model = Detector()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Boxes(), batch_size=8, shuffle=False, collate_fn=collate)
for step, (images, targets) in enumerate(loader):
    batch = (images, targets)
    if mode == "copy":
        targets = [dict(target) for target in targets]
    with minrepro_capture.capture(out_dir, step=step, batch=batch):
        loss = detection_loss(model, images, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("step", step, "loss %.3f" % loss.item(), flush=True)
