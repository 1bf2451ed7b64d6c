"""A user's own training step, as the cost benchmark runs it: a small
convolutional classifier over 10 classes, one AdamW step on the batch file
given. The batch (make_batch.py) has one sample whose target is 10: cross
entropy then fails with "Target 10 is out of bounds."."""
import sys

import torch

batch = torch.load(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(), torch.nn.Linear(32, 10))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss = torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"])
loss.backward()
optimizer.step()
print("loss", float(loss))
