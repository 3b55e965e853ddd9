"""A learner's run alone, and beside a noisy neighbour, measured in one run.

The neighbour is a playground snippet that forks 24 children, each calling setsid() (its own
session, so its own scheduler autogroup where the host uses them) and spinning, in the pool's other
worker, until its wall time ends it. The learner runs a typical question snippet over and over,
first alone, then while the neighbour spins; the ratio of the two p50 latencies is the slowdown.

Target (2-core CPU): beside / alone <= 2x (before issue 11, with no CPU cap per run: ~8x). The
neighbour runs with `processes=32`, the old default, so it gets all 24 children either way.

Usage: `python bench/noisy_neighbour.py [--runs N] [--baseline REV]`; with `--baseline` the same
measurement is taken on the sandbox of an earlier commit too (`git archive`, nothing in the
checkout changes), in a child process of its own, and printed beside today's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LEARNER = """\
import torch
layer = torch.nn.Linear(8, 4)
with torch.autocast("cpu", dtype=torch.float16):
    y = layer(torch.ones(2, 8))
print(y.dtype)
"""

NEIGHBOUR = """\
import os, time
started = 0
for _ in range(24):
    try:
        if os.fork() == 0:
            os.setsid()
            while True:
                pass
        started += 1
    except OSError:
        break
print("spinning", started, flush=True)
time.sleep(3600)
"""


def p50(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2]


def measure(root: str, runs: int) -> dict:
    """Both measurements with the sandbox found under `root`, in this process."""
    sys.path.insert(0, root)
    from sandbox import Limits, Sandbox

    def learner_runs(sb) -> list[float]:
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            r = sb.run(LEARNER)
            times.append((time.perf_counter() - t) * 1000)
            assert r.status == "ok" and r.stdout == "torch.float16\n", r
            time.sleep(0.05)
        return times

    with Sandbox(workers=2) as sb:
        learner_runs(sb)[:5]  # warm: let the pool fill
        time.sleep(1.0)
        alone = learner_runs(sb)
        time.sleep(1.0)
        wall_s = 3.0 + runs * 0.5  # bounded: the neighbour ends at its wall time, whatever happens
        noisy = {}
        neighbour = threading.Thread(
            target=lambda: noisy.setdefault(
                "r", sb.run(NEIGHBOUR, limits=Limits(wall_s=wall_s, cpu_s=600, processes=32))
            )
        )
        neighbour.start()
        time.sleep(1.5)  # until its children spin
        beside = learner_runs(sb)
        neighbour.join()
        protections = sb.protections
    r = noisy["r"]
    return {
        "alone": p50(alone),
        "beside": p50(beside),
        "neighbour": f"{r.status}, {r.stdout.strip() or 'no output'}",
        "cpu_cap": "cpu-cap" in protections,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30, help="learner runs alone, then beside (each)")
    ap.add_argument("--baseline", help="also measure the sandbox of this commit (e.g. c372b7c)")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        print(json.dumps(measure(args.serve, args.runs)))
        return
    print(
        f"host: {os.cpu_count()} cores; learner: autocast Linear; neighbour: 24 forked setsid() spinners"
    )
    rows = [("today", measure(str(REPO), args.runs))]
    if args.baseline:
        with tempfile.TemporaryDirectory(prefix="ampquiz-baseline-") as tmp:
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.baseline, "sandbox"],
                capture_output=True,
                check=True,
            )
            with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
                tar.extractall(tmp, filter="data")
            out = subprocess.run(
                [sys.executable, __file__, "--serve", tmp, "--runs", str(args.runs)],
                cwd=REPO, capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows.append((args.baseline, json.loads(out.stdout.splitlines()[-1])))
    for name, m in rows:
        print(
            f"{name}: cpu cap per run {'on' if m['cpu_cap'] else 'OFF'}; neighbour: {m['neighbour']}"
        )
        print(f"  learner p50 alone                           {m['alone']:8.1f} ms")
        print(f"  learner p50 beside the neighbour            {m['beside']:8.1f} ms")
        print(f"  slowdown (beside / alone; target <= 2x)     {m['beside'] / m['alone']:8.1f} x")


if __name__ == "__main__":
    main()
