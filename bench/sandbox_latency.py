"""Warm sandbox runs against a cold `python -c`, on the same snippet, measured side by side in one run.

Target (2-core CPU): warm p50 <= 10 ms and >= 100x faster than cold. Also prints runs/s with two
workers busy. Usage: `python bench/sandbox_latency.py [--cold N] [--warm N]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stats import line, p50, percentile
from sandbox import Sandbox

SNIPPET = """\
import torch
layer = torch.nn.Linear(8, 4)
with torch.autocast("cpu", dtype=torch.float16):
    y = layer(torch.ones(2, 8))
print(y.dtype)
"""


def cold_runs(n: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(n):
            t = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, cwd=tmp, check=False)
            times.append((time.perf_counter() - t) * 1000)
            assert out.stdout == "torch.float16\n", out
    return times


def warm_runs(sb: Sandbox, n: int, pause_s: float) -> list[float]:
    """`pause_s` between runs lets the pool prepare the next process, as it does between a
    learner's clicks; with no pause each run also competes with that preparation for the CPU."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = sb.run(SNIPPET)
        times.append((time.perf_counter() - t) * 1000)
        assert r.status == "ok" and r.stdout == "torch.float16\n", r
        time.sleep(pause_s)
    return times


def throughput(sb: Sandbox, seconds: float) -> float:
    done = 0
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            assert sb.run(SNIPPET).status == "ok"
            with lock:
                done += 1

    threads = [threading.Thread(target=client) for _ in range(2)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return done / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cold", type=int, default=7)
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    print(f"host: {os.cpu_count()} cores; snippet: autocast Linear + print(y.dtype)")
    with Sandbox(workers=2) as sb:
        warm_runs(sb, 5, 0.2)  # let the pool fill
        warm = warm_runs(sb, args.warm, 0.2)
        back_to_back = warm_runs(sb, args.warm, 0.0)
        cold = cold_runs(args.cold)
        rate = throughput(sb, args.seconds)
        huge_mib = sb.huge_page_bytes >> 20
    print(line(f"cold python -c p50 ({args.cold} runs)", f"{p50(cold):8.1f} ms"))
    print(line(f"warm Sandbox.run p50 ({args.warm} runs, 0.2 s apart)", f"{p50(warm):8.1f} ms"))
    print(line("warm Sandbox.run p90 / p99", f"{percentile(warm, 90):8.1f} ms / {percentile(warm, 99):.1f} ms"))
    print(line("warm Sandbox.run p50, back to back", f"{p50(back_to_back):8.1f} ms"))
    print(line("speed-up (cold p50 / warm p50)", f"{p50(cold) / p50(warm):8.1f} x"))
    print(line("throughput, 2 workers busy", f"{rate:8.1f} runs/s"))
    print(line("zygote heap on 2 MiB pages (cheaper forks)", f"{huge_mib:8d} MiB"))


if __name__ == "__main__":
    main()
