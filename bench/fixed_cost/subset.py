"""For C-Vise: the batch of the sample positions listed one per line in
LINES (the file C-Vise reduces), written to OUT. Usage: subset.py FULL LINES OUT"""
import sys

import torch

full, lines, out = sys.argv[1:4]
keep = [int(line) for line in open(lines) if line.strip()]
batch = torch.load(full)
torch.save({k: v[keep] for k, v in batch.items()}, out)
