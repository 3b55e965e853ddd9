"""The bank at scale, measured in one run: lint, server start-up, and request latency while a file
is edited, at 113 (the real bank's size then), 1,000 and 5,000 questions.

Larger banks are copies of the real one with the ids renamed (and its CPU record copied with them:
a record entry's hash does not include the id), so the server has every key proved already and
what is measured is the bank, not the sandbox. During the edit, 10 clients load question pages
back to back; one file is rewritten a second in, and the slowest request of the window is printed.

Targets (2-core CPU): start at 5,000 questions under 4 s; during a file edit no request slower
than 100 ms at 5,000. Usage: `python bench/bank_scale.py [--sizes 113,1000,5000] [--processes N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# bench/http.py would shadow the standard library's `http` package: the repository root replaces
# this file's folder on sys.path.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

import httpx
import yaml

from bench._stats import line, percentile
from bench.http import Connection, new_event_loop, status_of


def make_bank(folder: Path, size: int) -> list[str]:
    """A bank of about `size` questions made of copies of the real one; returns its ids."""
    real = sorted((ROOT / "questions").glob("*.yaml"))
    sets = [(p.stem, yaml.safe_load(p.read_text())) for p in real]
    per_copy = sum(len(d["questions"]) for _, d in sets)
    record = json.loads(next((ROOT / "questions" / "verified").glob("cpu-*.json")).read_text())
    results: dict[str, dict] = {}
    ids: list[str] = []
    folder.mkdir(parents=True)
    copies = max(1, round(size / per_copy))
    for n in range(copies):
        for stem, data in sets:
            suffix = f"-c{n}" if n else ""
            copy = {**data, "questions": []}
            for q in data["questions"]:
                qid = q["id"] + suffix
                copy["questions"].append({**q, "id": qid})
                ids.append(qid)
                if q["id"] in record["results"]:
                    results[qid] = record["results"][q["id"]]
            (folder / f"{stem}{suffix}.yaml").write_text(
                yaml.safe_dump(copy, sort_keys=False, allow_unicode=True)
            )
    (folder / "verified").mkdir()
    (
        folder / "verified" / next((ROOT / "questions" / "verified").glob("cpu-*.json")).name
    ).write_text(json.dumps({"environment": record["environment"], "results": results}))
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(
    workdir: Path, bank: Path, serve_args: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AMPQUIZ_DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite'}",
           "AMPQUIZ_BANK": str(bank), "AMPQUIZ_PORT": str(port)}  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--no-access-log", "--log-level", "warning", *serve_args],
                            cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    while time.perf_counter() - started < 120:
        if status_of(url) == 200:
            return proc, url, time.perf_counter() - started
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the server did not start")


async def during_edit(
    url: str,
    ids: list[str],
    bank: Path,
    clients: int = 10,
    seconds: float = 4.0,
    edit_file: bool = True,
) -> list[float]:
    """Latencies of question pages loaded back to back while one file is rewritten (after every
    page was loaded once, so first renders and question runs are out of the way). The clients
    are bench/http.py's keep-alive connections: httpx would spend ~4 ms of the 2 cores' CPU on
    each request, which the server's latencies would then carry."""
    parsed = httpx.URL(url)
    conns = [Connection(parsed.host, parsed.port or 80) for _ in range(clients)]
    for n, qid in enumerate(ids[: clients * 40]):
        await conns[n % clients].request("GET", f"/questions/{qid}")
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client(n: int) -> None:
        i = n
        while time.perf_counter() < stop:
            t = time.perf_counter()
            status, _ = await conns[n].request("GET", f"/questions/{ids[i % len(ids)]}")
            latencies.append((time.perf_counter() - t) * 1000)
            assert status == 200, status
            i += clients

    async def edit() -> None:
        await asyncio.sleep(1.0)
        if not edit_file:  # the same window without an edit: what the machine gives anyway
            return
        target = min(bank.glob("*.yaml"))
        target.write_text(target.read_text().replace("prompt:", "prompt: ", 1))  # a real change

    try:
        await asyncio.gather(edit(), *(client(n) for n in range(clients)))
    finally:
        for c in conns:
            c.close()
    return latencies


def lint_s(bank: Path) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "app.cli", "lint", str(bank)],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="113,1000,5000")
    ap.add_argument(
        "--processes", type=int, default=None, help="passed to `ampquiz serve --processes N`"
    )
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"host: {os.cpu_count()} cores")
    last: dict[str, float] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            bank = Path(tmp) / "bank"
            ids = make_bank(bank, size)
            linted = lint_s(bank)
            proc, url, started = start(
                Path(tmp), bank, ("--processes", str(args.processes)) if args.processes else ()
            )
            try:
                loop = new_event_loop()
                try:
                    quiet = loop.run_until_complete(during_edit(url, ids, bank, edit_file=False))
                    latencies = loop.run_until_complete(during_edit(url, ids, bank))
                finally:
                    loop.close()
            finally:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
            worst = max(latencies)
            print(
                line(
                    f"{len(ids)} questions: lint / start-up", f"{linted:5.2f} s / {started:5.2f} s"
                )
            )
            print(line(f"{len(ids)} questions: pages, no edit (control)",
                       f"p50 {percentile(quiet, 50):5.1f} ms, p99 {percentile(quiet, 99):5.1f} ms, "
                       f"slowest {max(quiet):6.1f} ms ({len(quiet)} requests)"))  # fmt: skip
            print(line(f"{len(ids)} questions: pages during an edit",
                       f"p50 {percentile(latencies, 50):5.1f} ms, p99 {percentile(latencies, 99):5.1f} ms, "
                       f"slowest {worst:6.1f} ms ({len(latencies)} requests)"))  # fmt: skip
            last = {"size": len(ids), "start": started, "worst": worst}
    if last and last["size"] >= 4500:
        print(
            line(
                "target: start at 5,000 under 4 s",
                f"{'met' if last['start'] < 4 else 'MISSED'} ({last['start']:.2f} s)",
            )
        )
        print(line("target: no request over 100 ms during an edit at 5,000",
                   f"{'met' if last['worst'] < 100 else 'MISSED'} ({last['worst']:.1f} ms)"))  # fmt: skip


if __name__ == "__main__":
    main()
