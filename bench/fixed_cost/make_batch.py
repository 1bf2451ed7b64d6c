"""The benchmark's batch: N images (3x32x32), labels in 0..9 but one 10
(sample 137, id 100137), ids 100000 + position. Usage: make_batch.py N OUT"""
import sys

import torch

n, out = int(sys.argv[1]), sys.argv[2]
g = torch.Generator().manual_seed(2026)
label = torch.randint(0, 10, (n,), generator=g)
label[137 % n] = 10
torch.save({"image": torch.randn(n, 3, 32, 32, generator=g), "label": label,
            "sample_id": torch.arange(100000, 100000 + n)}, out)
