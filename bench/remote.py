"""A trivial run through the local pool against the same run through NATS to `ampquiz worker`
processes on this host, measured side by side in one run of this script.

Prints p50/p99 of one run at a time (alternating rounds, local then remote, so both see the same
machine), and runs/s with one and with two workers kept busy. Target: remote p50 within 2 ms of
local. Needs the NATS server the tests use (AMPQUIZ_TEST_NATS_URL, default nats://127.0.0.1:4222).

Usage: `python bench/remote.py [--runs N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.runs.local import LocalRuns
from app.runs.remote import RemoteRuns
from app.settings import Settings
from bench._stats import line, p50, percentile
from sandbox import Limits, Sandbox
from tests.support.workers import NATS_URL, WORKERS_KEY, WorkerProcess, reset_stream

TRIVIAL = "print(1)"
LIMITS = Limits(wall_s=10, cpu_s=10)


async def one_at_a_time(runs: object, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        result = await runs.run(TRIVIAL, LIMITS)  # type: ignore[attr-defined]
        samples.append((time.perf_counter() - started) * 1000)
        assert result.stdout == "1\n", result
        await asyncio.sleep(0.02)  # as a learner would: the pool prepares the next runner meanwhile
    return samples


async def throughput(runs: object, concurrency: int, seconds: float) -> float:
    done = 0
    end = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        while time.perf_counter() < end:
            result = await runs.run(TRIVIAL, LIMITS)  # type: ignore[attr-defined]
            assert result.stdout == "1\n", result
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


async def wait_for(web: RemoteRuns, n: int) -> None:
    deadline = time.monotonic() + 120
    while len(web.online("cpu")) < n:
        assert time.monotonic() < deadline, "the workers did not come online"
        await asyncio.sleep(0.1)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=100, help="runs per round and side")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument(
        "--seconds", type=float, default=5.0, help="length of each throughput measurement"
    )
    args = ap.parse_args()
    # The workers' deployment (`WorkerProcess` starts them on the tests' one): a web on another
    # name never hears them.
    url = NATS_URL
    await reset_stream()
    work = Path(tempfile.mkdtemp(prefix="ampquiz-bench-remote-"))
    workers = [WorkerProcess(work, slots=2, name="1")]
    local = LocalRuns(Sandbox(workers=2).start(), owned=True)
    # A local NATS server without users, as the tests': allowed as for local development.
    settings = Settings(workers_url=url, workers_key=WORKERS_KEY, broker_insecure=True)
    web = await RemoteRuns.connect(url, settings, discover_s=0.3)
    try:
        await wait_for(web, 1)
        await one_at_a_time(local, 10)  # warm both paths
        await one_at_a_time(web, 10)
        local_ms: list[float] = []
        remote_ms: list[float] = []
        for _ in range(args.rounds):
            local_ms += await one_at_a_time(local, args.runs)
            remote_ms += await one_at_a_time(web, args.runs)
        print(
            f"one run at a time, {len(local_ms)} runs per side in {args.rounds} alternating rounds:"
        )
        print(
            line(
                "  local pool p50 / p99", f"{p50(local_ms):.2f} / {percentile(local_ms, 99):.2f} ms"
            )
        )
        print(
            line(
                "  NATS to one worker p50 / p99",
                f"{p50(remote_ms):.2f} / {percentile(remote_ms, 99):.2f} ms",
            )
        )
        gap = p50(remote_ms) - p50(local_ms)
        print(
            line(
                "  remote p50 minus local p50",
                f"{gap:+.2f} ms (target: within 2 ms) {'MET' if gap <= 2 else 'MISSED'}",
            )
        )
        local_rps = await throughput(local, 4, args.seconds)
        one_rps = await throughput(web, 4, args.seconds)
        workers.append(WorkerProcess(work, slots=2, name="2"))
        await wait_for(web, 2)
        two_rps = await throughput(web, 8, args.seconds)
        print("runs/s with every slot busy (2 cores on this host, shared by every worker):")
        print(line("  local pool (2 slots)", f"{local_rps:.0f}"))
        print(line("  one worker (2 slots)", f"{one_rps:.0f} ({one_rps / local_rps:.2f}x local)"))
        print(
            line(
                "  two workers (2 slots each)",
                f"{two_rps:.0f} ({two_rps / one_rps:.2f}x one worker)",
            )
        )
    finally:
        await web.close()
        await local.close()
        for w in workers:
            w.stop()


if __name__ == "__main__":
    import uvloop  # as uvicorn runs the web

    uvloop.run(main())
