"""Warm sandbox runs against a cold `python -c`, on the same snippet, measured side by side in one run;
and the same warm runs on the sandbox of an earlier commit, interleaved with today's.

Target (2-core CPU): warm p50 <= 10 ms and >= 100x faster than cold, and within 1 ms of the
sandbox before issue 11 (commit c372b7c: 3.9 ms on the 2-core reference host). The earlier sandbox
is taken with `git archive` (nothing in the checkout changes) and runs its own pool in a child
process; the two pools take turns, block by block, so background load falls on both alike.
Also prints runs/s with two workers busy.

Usage: `python bench/sandbox_latency.py [--cold N] [--warm N] [--baseline REV|none]`.
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
BEFORE_ISSUE_11 = "c372b7c"

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


def warm_runs(sb, n: int, pause_s: float) -> list[float]:
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


def throughput(sb, seconds: float) -> float:
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


def serve(root: str) -> None:
    """Child mode: a pool of the sandbox found under `root`, answering one command per line."""
    sys.path.insert(0, root)
    from sandbox import Sandbox

    with Sandbox(workers=2) as sb:
        warm_runs(sb, 5, 0.2)
        print(json.dumps("ready"), flush=True)
        for line in sys.stdin:
            what, *args = line.split()
            if what == "warm":
                print(json.dumps(warm_runs(sb, int(args[0]), float(args[1]))), flush=True)
            elif what == "throughput":
                print(json.dumps(throughput(sb, float(args[0]))), flush=True)
            else:
                return


class Baseline:
    """The sandbox of an earlier commit, in a child process of its own."""

    def __init__(self, rev: str) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="ampquiz-baseline-")
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "sandbox"], capture_output=True, check=True)
        with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
            tar.extractall(self.tmp.name, filter="data")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", self.tmp.name],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.ask("") == "ready"

    def ask(self, command: str):
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        try:
            self.ask("quit") if self.proc.poll() is None else None
        except (OSError, ValueError):
            pass
        self.proc.wait(timeout=60)
        self.tmp.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cold", type=int, default=7)
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--baseline", default=BEFORE_ISSUE_11, help="commit whose sandbox to compare with, or 'none'")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve)
    sys.path.insert(0, str(REPO))
    from bench._stats import line, p50, percentile
    from sandbox import Sandbox

    print(f"host: {os.cpu_count()} cores; snippet: autocast Linear + print(y.dtype)")
    base = Baseline(args.baseline) if args.baseline != "none" else None
    warm, back, old_warm, old_back = [], [], [], []
    blocks = 5
    try:
        with Sandbox(workers=2) as sb:
            warm_runs(sb, 5, 0.2)  # let the pool fill
            for _ in range(blocks):  # turns: today's block, then the baseline's, while the other idles
                warm += warm_runs(sb, args.warm // blocks, 0.2)
                back += warm_runs(sb, args.warm // blocks, 0.0)
                time.sleep(1.0)  # let this pool's runners be prepared before the other measures
                if base:
                    old_warm += base.ask(f"warm {args.warm // blocks} 0.2")
                    old_back += base.ask(f"warm {args.warm // blocks} 0.0")
                    time.sleep(1.0)
            cold = cold_runs(args.cold)
            rate = throughput(sb, args.seconds)
            old_rate = base.ask(f"throughput {args.seconds}") if base else None
            huge_mib = sb.huge_page_bytes >> 20
    finally:
        if base:
            base.close()
    print(line(f"cold python -c p50 ({args.cold} runs)", f"{p50(cold):8.1f} ms"))
    print(line(f"warm Sandbox.run p50 ({len(warm)} runs, 0.2 s apart)", f"{p50(warm):8.1f} ms"))
    print(line("warm Sandbox.run p90 / p99", f"{percentile(warm, 90):8.1f} ms / {percentile(warm, 99):.1f} ms"))
    print(line("warm Sandbox.run p50, back to back", f"{p50(back):8.1f} ms"))
    print(line("speed-up (cold p50 / warm p50)", f"{p50(cold) / p50(warm):8.1f} x"))
    print(line("throughput, 2 workers busy", f"{rate:8.1f} runs/s"))
    print(line("zygote heap on 2 MiB pages (cheaper forks)", f"{huge_mib:8d} MiB"))
    if base:
        print(f"sandbox of {args.baseline} (before issue 11), interleaved with the runs above:")
        print(line("  warm p50, 0.2 s apart: then / now / now - then", f"{p50(old_warm):8.1f} ms / {p50(warm):.1f} ms / {p50(warm) - p50(old_warm):+.1f} ms"))
        print(line("  warm p50, back to back: then / now", f"{p50(old_back):8.1f} ms / {p50(back):.1f} ms"))
        print(line("  throughput, 2 workers busy: then / now", f"{old_rate:8.1f} / {rate:.1f} runs/s"))


if __name__ == "__main__":
    main()
