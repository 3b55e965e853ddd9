"""The cost of `explain=True` against `explain=False` on a 20-step training loop, in one run.

Both are whole `Sandbox.run` calls on the same snippet, interleaved so machine noise hits both
alike. Target: ratio <= 3x. Usage: `python bench/explain_overhead.py [--runs N]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stats import line, p50
from sandbox import Sandbox

TRAINING_LOOP = """\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")
x, target = torch.randn(32, 64), torch.randn(32, 8)
for step in range(20):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(x), target)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
print(f"{loss.item():.4f}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    plain, explained = [], []
    with Sandbox(workers=2) as sb:
        for explain in (False, True):  # warm both paths once
            sb.run(TRAINING_LOOP, explain=explain)
        for _ in range(args.runs):
            for explain, bucket in ((False, plain), (True, explained)):
                t = time.perf_counter()
                r = sb.run(TRAINING_LOOP, explain=explain)
                bucket.append((time.perf_counter() - t) * 1000)
                assert r.status == "ok", r
        report = sb.run(TRAINING_LOOP, explain=True).explanation
    size = len(json.dumps(report))
    print(
        f"snippet: 20-step training loop (Linear 64-64-8, autocast cpu float16, GradScaler), {args.runs} runs each"
    )
    print(line("Sandbox.run explain=False p50", f"{p50(plain):8.1f} ms"))
    print(line("Sandbox.run explain=True  p50", f"{p50(explained):8.1f} ms"))
    print(line("ratio (explain / plain)", f"{p50(explained) / p50(plain):8.2f} x"))
    print(line("explanation size", f"{size / 1024:8.1f} KiB, {len(report['ops'])} op rows"))


if __name__ == "__main__":
    main()
