"""The interview live channel under load, measured in one run: N concurrent interviews, each
with its interviewer's page connected by server-sent events, on loopback.

Starts `ampquiz serve` (a real uvicorn, a temp SQLite file, the small browser-test bank) in a
subprocess; makes N interviews in its database; opens one event stream per interview (as the
interviewer's page does), then posts E notes to each interview from N concurrent writers, one
every `--interval-ms` each (jittered). A note takes the same path as everything a candidate does:
stored in the database first, then fanned out to the interview's streams. Delivery latency is
from the moment the writer starts its POST to the moment the stream hands the event over.

Checks: every event delivered, to the right stream, in the order it was stored (ids and the
writer's own sequence both increasing), none twice. Target: p99 delivery < 200 ms at N = 50.
Bounded: stops after every event arrived or after `--timeout-s`, whichever is first.
Usage: `python bench/interviews.py [--interviews 50] [--events 40] [--interval-ms 250]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Run as a script, this folder would come first on sys.path, and bench/http.py would shadow the
# standard library's `http`: the repository root takes its place.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

import httpx

from app.interview import model
from app.store import Store
from bench._stats import line, p50, percentile
from bench.http import start_server, stop_server

BANK = ROOT / "tests" / "browser" / "bank"
QUESTION = "gradscaler-skips-inf-step"


async def follow(
    client: httpx.AsyncClient, host: str, expect: int, received: list, ready: asyncio.Event
) -> None:
    """One interviewer's stream: (arrival time, event) for each note, until `expect` arrived."""
    async with client.stream("GET", f"/interviewer/{host}/events") as response:
        ready.set()
        async for raw in response.aiter_lines():
            if not raw.startswith("data: "):
                continue
            event = json.loads(raw[6:])
            if event["kind"] == "note":
                received.append((time.perf_counter(), event))
                if len(received) >= expect:
                    return


async def write(
    client: httpx.AsyncClient, host: str, events: int, interval_s: float, sent: dict
) -> None:
    await asyncio.sleep(random.uniform(0, interval_s))
    for seq in range(events):
        sent[seq] = time.perf_counter()
        r = await client.post(f"/interviewer/{host}/notes", data={"question": QUESTION, "text": str(seq)},
                              headers={"Accept": "application/json"})  # fmt: skip
        r.raise_for_status()
        await asyncio.sleep(interval_s * random.uniform(0.5, 1.5))


async def run(url: str, hosts: list[str], events: int, interval_s: float, timeout_s: float) -> dict:
    limits = httpx.Limits(
        max_connections=2 * len(hosts) + 10, max_keepalive_connections=2 * len(hosts) + 10
    )
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as client:
        received: list[list] = [[] for _ in hosts]
        sent: list[dict] = [{} for _ in hosts]
        ready = [asyncio.Event() for _ in hosts]
        streams = [
            asyncio.create_task(follow(client, h, events, received[i], ready[i]))
            for i, h in enumerate(hosts)
        ]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 30)
        await asyncio.sleep(0.5)  # every stream subscribed before the first note
        started = time.perf_counter()
        writers = [
            asyncio.create_task(write(client, h, events, interval_s, sent[i]))
            for i, h in enumerate(hosts)
        ]
        _done, pending = await asyncio.wait([*writers, *streams], timeout=timeout_s)
        for task in pending:
            task.cancel()
        elapsed = time.perf_counter() - started
    latencies, missing, disorder = [], 0, 0
    for got, times in zip(received, sent, strict=True):
        seqs = [int(e["data"]["text"]) for _, e in got]
        ids = [e["id"] for _, e in got]
        missing += events - len(set(seqs))
        disorder += sum(1 for a, b in itertools.pairwise(ids) if b <= a)
        disorder += sum(1 for a, b in itertools.pairwise(seqs) if b != a + 1)
        latencies += [(at - times[int(e["data"]["text"])]) * 1000 for at, e in got]
    return {"latencies": latencies, "missing": missing, "disorder": disorder, "elapsed": elapsed,
            "timed_out": bool(pending)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interviews", type=int, default=50)
    parser.add_argument("--events", type=int, default=40, help="notes per interview")
    parser.add_argument(
        "--interval-ms", type=float, default=250.0, help="mean gap between one writer's notes"
    )
    parser.add_argument("--timeout-s", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ampquiz-bench-interviews-") as tmp:
        workdir = Path(tmp)
        proc, url = start_server(workdir, workers=1, queue=4, bank=BANK)
        try:
            store = Store(f"sqlite:///{workdir / 'ampquiz.db'}")
            hosts = [
                model.create(store, [QUESTION], by="bench").host_token
                for _ in range(args.interviews)
            ]
            store.close()
            out = asyncio.run(run(url, hosts, args.events, args.interval_ms / 1000, args.timeout_s))
        finally:
            stop_server(proc)
    lat, total = out["latencies"], args.interviews * args.events
    print(line("interviews (one event stream each)", str(args.interviews)))
    print(
        line(
            "events sent",
            f"{total} ({args.events} per interview, one per ~{args.interval_ms:.0f} ms each)",
        )
    )
    print(
        line(
            "events delivered",
            f"{len(lat)} ({out['missing']} missing, {out['disorder']} out of order)",
        )
    )
    print(
        line("throughput", f"{len(lat) / out['elapsed']:.0f} events/s over {out['elapsed']:.1f} s")
    )
    if lat:
        print(
            line(
                "delivery p50 / p99 / max",
                f"{p50(lat):.1f} / {percentile(lat, 99):.1f} / {max(lat):.1f} ms",
            )
        )
    ok = (
        not out["timed_out"]
        and out["missing"] == 0
        and out["disorder"] == 0
        and lat
        and percentile(lat, 99) < 200
    )
    print(line("target: all delivered, in order, p99 < 200 ms", "met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
