"""HTTP latency of the web app next to the sandbox called directly, measured in one run.

Starts `ampquiz serve` (a real uvicorn, temp SQLite file, the real bank) in a subprocess, then
drives it with N concurrent clients (keep-alive connections of a minimal HTTP/1.1 client, each
with its own learner cookie, kept across rounds):
  - a question page (GET /questions/<id>): p50/p99 latency and requests/s;
  - POST /api/run with a trivial snippet: p50/p99 and runs/s;
next to `Sandbox.run` called directly from N threads (same workers, same snippet), in rounds
that alternate with the HTTP ones; and once more with one client for both, to show the web's
own overhead per run.

Then a second server on a copy of the bank without its verification record, so it verifies every
runnable key on load in the background: the question page under the same clients while that goes
on, beside the first server's numbers.

Targets (2-core CPU, 20 clients): question page p99 < 50 ms, also while the whole bank is being
verified on load; /api/run p50 within 15 ms of the direct Sandbox.run p50.
Usage: `python bench/http.py [--clients 20] [--pages 2000] [--runs 800]`.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Named http.py, this file's folder would shadow the standard library's `http` package when run as
# a script: put the repository root on sys.path in its place.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

import httpx

from bench._stats import line, p50, percentile

SNIPPET = "print(1)\n"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (uvicorn[standard] brings it): it costs the 2 cores the server shares
    with the load generator about half as much CPU per request as asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_of(url: str, path: str = "/healthz") -> int | None:
    """The status `path` answers with, or None when nothing answers yet. For polling a server
    while it starts: `httpx.get` builds an SSL context each call (~23 ms of CPU here), so polling
    with it every 50 ms took a third of a core from the start being measured."""
    parsed = urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port or 80, timeout=2)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


def start_server(
    workdir: Path,
    workers: int,
    queue: int,
    bank: Path = ROOT / "questions",
    *,
    database_url: str | None = None,
    serve_args: tuple[str, ...] = (),
    source: Path = ROOT,
) -> tuple[subprocess.Popen, str]:
    """`ampquiz serve` on a free port (a SQLite file in `workdir` unless `database_url` says
    otherwise; `serve_args` are passed on, e.g. `--processes 2`; `source`: the tree whose `app`
    it runs, e.g. a checkout of an earlier commit), once /healthz answers."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(source),
        "AMPQUIZ_DATABASE_URL": database_url or f"sqlite:///{workdir / 'ampquiz.db'}",
        "AMPQUIZ_BANK": str(bank),
        "AMPQUIZ_PORT": str(port),
        "AMPQUIZ_SANDBOX_WORKERS": str(workers),
        "AMPQUIZ_RUN_QUEUE": str(queue),
        # The benchmarks' learners answer with no pause, all from this host: no answer rate.
        "AMPQUIZ_ANSWERS_PER_MINUTE": "0",
        "AMPQUIZ_ANSWERS_PER_MINUTE_PER_ADDRESS": "0",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--no-access-log", "--log-level", "warning", *serve_args],
        cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the server exited while starting")
        if status_of(url) == 200:
            return proc, url
        time.sleep(0.2)
    stop_server(proc)  # not left running (its own processes with it) when the bench gives up
    raise SystemExit("the server did not start in time")


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


class Connection:
    """A minimal keep-alive HTTP/1.1 client (Content-Length bodies only), so the load generator
    costs the server's 2 cores as little CPU as possible; httpx costs ~4 ms of CPU per request."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.cookie = b""
        self.location = b""
        """The last response's Location header (a redirect's target), or empty."""

    async def request(
        self, method: str, path: str, body: bytes = b"", content_type: bytes = b"application/json"
    ) -> tuple[int, bytes]:
        try:
            return await self._request(method, path, body, content_type)
        except (ConnectionError, asyncio.IncompleteReadError, IndexError):
            # The server closed an idle keep-alive connection (uvicorn's 5 s timeout, between
            # rounds): open a new one and send the request again, as a browser does.
            self.close()
            self.writer = None
            return await self._request(method, path, body, content_type)

    async def _request(
        self, method: str, path: str, body: bytes, content_type: bytes
    ) -> tuple[int, bytes]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAccept: text/html,application/json\r\n".encode()
        if self.cookie:
            head += b"Cookie: " + self.cookie + b"\r\n"
        if body:
            head += b"Content-Type: %s\r\nContent-Length: %d\r\n" % (content_type, len(body))
        self.writer.write(head + b"\r\n" + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        self.location = b""
        closing = False
        while (header := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = header.partition(b":")
            name = name.lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"location":
                self.location = value.strip()
            elif name == b"set-cookie" and not self.cookie:
                self.cookie = value.strip().split(b";")[0]
            elif name == b"connection":
                closing = b"close" in value.lower()
        page = await self.reader.readexactly(length)
        if closing:  # the server closes it after this response: the next request opens another
            self.close()
            self.writer = None
        return status, page

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Clients:
    """`n` keep-alive connections, each with its learner cookie, on one event loop in a thread of
    its own. They live across rounds, as browsers keep theirs: a round measures requests, not
    connects and first visits."""

    def __init__(self, url: str, n: int) -> None:
        parsed = httpx.URL(url)
        self.conns = [Connection(parsed.host, parsed.port or 80) for _ in range(n)]
        self.loop = new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def hammer(
        self,
        path: str,
        total: int,
        method: str,
        body: dict | None = None,
        clients: int | None = None,
    ) -> tuple[list[float], float, int]:
        """`total` requests over the first `clients` connections at once; latencies (ms), wall
        time (s), failures."""
        return self._call(
            self._hammer(path, total, method, body, self.conns[: clients or len(self.conns)])
        )

    async def _hammer(
        self, path: str, total: int, method: str, body: dict | None, conns: list[Connection]
    ) -> tuple[list[float], float, int]:
        payload = json.dumps(body).encode() if body is not None else b""
        latencies: list[float] = []
        failures = 0
        remaining = total

        async def client(conn: Connection) -> None:
            nonlocal remaining, failures
            while remaining > 0:
                remaining -= 1
                t = time.perf_counter()
                status, _ = await conn.request(method, path, payload)
                latencies.append((time.perf_counter() - t) * 1000)
                failures += status != 200

        started = time.perf_counter()
        await asyncio.gather(*(client(conn) for conn in conns))
        return latencies, time.perf_counter() - started, failures

    def one_by_one(self, path: str, n: int) -> list[float]:
        """`n` runs from one client at a person's pace (the pool re-forks between runs)."""
        return self._call(self._one_by_one(path, n))

    async def _one_by_one(self, path: str, n: int) -> list[float]:
        conn = self.conns[0]
        out = []
        for _ in range(n):
            t = time.perf_counter()
            status, body = await conn.request("POST", path, json.dumps({"code": SNIPPET}).encode())
            out.append((time.perf_counter() - t) * 1000)
            assert status == 200 and json.loads(body)["run"]["stdout"] == "1\n", body
            await asyncio.sleep(0.01)
        return out

    def close(self) -> None:
        async def shut() -> None:
            for conn in self.conns:
                conn.close()

        self._call(shut())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


Sample = tuple[list[float], float]


def closed_loop(run: Callable[[], object], clients: int, total: int) -> Sample:
    """`total` calls of `run` from `clients` threads; latencies (ms) and wall time (s)."""
    latencies: list[float] = []
    lock = threading.Lock()
    remaining = [total]

    def client() -> None:
        while True:
            with lock:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            t = time.perf_counter()
            run()
            ms = (time.perf_counter() - t) * 1000
            with lock:
                latencies.append(ms)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return latencies, time.perf_counter() - started


class Direct:
    """Sandbox.run from threads: as is, and served in arrival order (as the web does).

    As is, Sandbox's semaphore lets a thread that has just finished barge ahead of the waiting
    ones, so a few threads get most runs: its p50 is short and its p99 very long. The web's runner
    queues runs first-in first-out (a thread pool as wide as the sandbox); the same FIFO here is
    the like-for-like baseline.
    """

    def __init__(self, workers: int) -> None:
        from sandbox import Sandbox

        self.sb = Sandbox(workers=workers).start()
        self.fifo = ThreadPoolExecutor(max_workers=workers)
        for _ in range(10):
            self.run()

    def run(self) -> None:
        r = self.sb.run(SNIPPET)
        assert r.status == "ok", r

    def in_order(self, clients: int, total: int) -> Sample:
        return closed_loop(lambda: self.fifo.submit(self.run).result(), clients, total)

    def as_is(self, clients: int, total: int) -> Sample:
        return closed_loop(self.run, clients, total)

    def single(self, n: int) -> list[float]:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            self.run()
            out.append((time.perf_counter() - t) * 1000)
            time.sleep(0.01)  # a person's pace: the pool re-forks between runs
        return out

    def close(self) -> None:
        self.fifo.shutdown()
        self.sb.close()


def report(label: str, latencies: list[float], wall: float, unit: str, failures: int = 0) -> None:
    extra = f", {failures} not 200" if failures else ""
    print(
        line(label, f"p50 {p50(latencies):7.1f} ms   p99 {percentile(latencies, 99):7.1f} ms   "
                    f"{len(latencies) / wall:7.1f} {unit}{extra}")
    )  # fmt: skip


def pages_while_proving(
    clients_n: int, workers: int, page: str
) -> tuple[list[float], float, int, int, int]:
    """Question pages while a server verifies its whole bank on load: (latencies, wall, failures,
    keys pending when the measurement began, keys proved while it ran)."""
    latencies: list[float] = []
    wall = 0.0
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        bank = Path(tmp) / "bank"
        shutil.copytree(ROOT / "questions", bank, ignore=shutil.ignore_patterns("verified"))
        proc, url = start_server(Path(tmp), workers, clients_n, bank=bank)
        clients = Clients(url, clients_n)

        def pending() -> int:
            return httpx.get(url + "/healthz", timeout=10).json()["proofs"]["counts"]["pending"]

        try:
            clients.hammer(page, 100, "GET")  # warm, as in the first phase
            at_start = pending()
            left = at_start
            while left:
                lat, w, f = clients.hammer(page, 200, "GET")
                latencies += lat
                wall += w
                failed += f
                left = pending()
        finally:
            clients.close()
            stop_server(proc)
    return latencies, wall, failed, at_start, at_start - left


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--pages", type=int, default=2000, help="question-page requests")
    ap.add_argument("--runs", type=int, default=800, help="runs, over HTTP and direct each")
    ap.add_argument("--rounds", type=int, default=8, help="alternating HTTP / direct rounds")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    # The queue holds every client, so the run numbers measure waiting rather than 429s.
    queue = args.clients

    from app.bank import load_bank

    bank = load_bank(ROOT / "questions")
    question = next(q for q in bank.questions if q.question.code and q.question.requires != "cuda")
    print(f"host: {os.cpu_count()} cores; {args.clients} concurrent clients; sandbox workers: {args.workers}; "
          f"run queue: {queue}; question: {question.id}")  # fmt: skip

    # The web and the direct pool are both started, and their rounds alternate, so that whatever
    # else the machine is doing weighs on both alike.
    runs: list[float] = []
    fifo: list[float] = []
    runs_wall = fifo_wall = 0.0
    runs_failed = 0
    per_round = max(args.clients, args.runs // args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp), args.workers, queue)
        direct = Direct(args.workers)
        clients = Clients(url, args.clients)
        try:
            page = f"/questions/{question.id}"
            clients.hammer(page, 200, "GET")  # warm: templates, caches, every learner's cookie
            clients.hammer("/api/run", 20, "POST", {"code": SNIPPET}, clients=2)
            pages, pages_wall, pages_failed = clients.hammer(page, args.pages, "GET")
            for _ in range(args.rounds):
                lat, wall, failed = clients.hammer("/api/run", per_round, "POST", {"code": SNIPPET})
                runs += lat
                runs_wall += wall
                runs_failed += failed
                lat, wall = direct.in_order(args.clients, per_round)
                fifo += lat
                fifo_wall += wall
            raw, raw_wall = direct.as_is(args.clients, per_round)
            api_single = clients.one_by_one("/api/run", 50)
            direct_single = direct.single(50)
        finally:
            clients.close()
            direct.close()
            stop_server(proc)
    proving, proving_wall, proving_failed, pending_at_start, proved = pages_while_proving(
        args.clients, args.workers, page
    )

    report(f"GET question page ({args.pages} requests)", pages, pages_wall, "req/s", pages_failed)
    report(
        f"GET question page while verifying on load ({len(proving)})",
        proving,
        proving_wall,
        "req/s",
        proving_failed,
    )
    print(
        line(
            "  keys verified on load during that",
            f"{proved} of {pending_at_start} pending when it began",
        )
    )
    report(f"POST /api/run ({len(runs)} runs)", runs, runs_wall, "runs/s", runs_failed)
    report(f"Sandbox.run direct, in arrival order ({len(fifo)})", fifo, fifo_wall, "runs/s")
    report(f"Sandbox.run direct, threads as they come ({len(raw)})", raw, raw_wall, "runs/s")
    print(line("one client: /api/run p50 vs Sandbox.run p50",
               f"{p50(api_single):7.1f} ms vs {p50(direct_single):.1f} ms"))  # fmt: skip
    page_ok = percentile(pages, 99) < 50
    gap = p50(runs) - p50(fifo)
    single_gap = p50(api_single) - p50(direct_single)
    print(
        line(
            "target: question page p99 < 50 ms",
            f"{'met' if page_ok else 'MISSED'} ({percentile(pages, 99):.1f} ms)",
        )
    )
    proving_ok = bool(proving) and percentile(proving, 99) < 50
    print(line("target: question page p99 < 50 ms while verifying on load",
               f"{'met' if proving_ok else 'MISSED'} ({percentile(proving, 99):.1f} ms)" if proving else "not measured"))  # fmt: skip
    print(line(f"target: /api/run p50 within 15 ms of direct ({args.clients} clients)",
               f"{'met' if gap <= 15 else 'MISSED'} ({gap:+.1f} ms)"))  # fmt: skip
    print(line("target: /api/run p50 within 15 ms of direct (1 client)",
               f"{'met' if single_gap <= 15 else 'MISSED'} ({single_gap:+.1f} ms)"))  # fmt: skip


if __name__ == "__main__":
    main()
