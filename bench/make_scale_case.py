#!/usr/bin/python3
"""A large case for bench/bench_scale.sh: N samples of F float32 features, a
4-class classifier, one target 4 among valid ones (the class4 bug at scale).

Usage: PYTHON bench/make_scale_case.py N OUT_DIR [FEATURES]
Writes OUT_DIR/batch.pt, model.pt (TorchScript), step.py (the same step as a
Python command), harness.yaml and command.yaml (flaky handling off: one run
per candidate, so trial counts are exact and comparable across N).
"""
import json
import os
import sys

import torch

n = int(sys.argv[1])
out = sys.argv[2]
features = int(sys.argv[3]) if len(sys.argv) > 3 else 64
os.makedirs(out, exist_ok=True)
gen = torch.Generator().manual_seed(1234)
targets = torch.randint(0, 4, (n,), generator=gen)
targets[(n * 5) // 7] = 4
# Written a chunk at a time: torch.randn of 10M x 64 at once would need the
# whole tensor twice.
inputs = torch.empty(n, features)
chunk = 1 << 20
for start in range(0, n, chunk):
    inputs[start:start + chunk].normal_(generator=gen)
torch.save({"input": inputs, "target": targets,
            "sample_id": torch.arange(n, dtype=torch.int64)}, os.path.join(out, "batch.pt"))
del inputs

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(features, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
torch.jit.save(torch.jit.script(model.eval()), os.path.join(out, "model.pt"))

with open(os.path.join(out, "step.py"), "w") as f:
    f.write('''import sys
import torch
import torch.nn.functional as F
batch = torch.load(sys.argv[1])
model = torch.jit.load(sys.argv[2])
loss = F.cross_entropy(model(batch["input"]), batch["target"], ignore_index=-100)
print("step ok, loss", loss.item())
''')
common = """batch: batch.pt
samples: {tensors: {input: 0, target: 0}, ids: sample_id}
flaky: {enabled: false}
failure: {family: index-error}
reducers: [samples]
"""
with open(os.path.join(out, "harness.yaml"), "w") as f:
    f.write(common + """trial:
  harness: {model: model.pt, input: input, target: target, loss: cross_entropy, ignore_index: -100}
  timeout: 600
output: harness.tar.gz
""")
with open(os.path.join(out, "command.yaml"), "w") as f:
    f.write(common + """trial:
  command: [PYTHON, "{case_dir}/step.py", "{batch}", "{case_dir}/model.pt"]
  timeout: 600
output: command.tar.gz
""".replace("PYTHON", json.dumps(sys.executable)))
