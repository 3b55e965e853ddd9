"""What the web tier spends per learner request, beside a bare FastAPI app, measured in one run.

Starts `ampquiz serve` twice on the real bank, one on a SQLite file and one on a fresh PostgreSQL
database (made for this run and dropped after it), and a bare FastAPI "hello" app on the same
uvicorn. Learners, each with their own cookie on a keep-alive connection, go round with no think
time: the question page -> answer it (a form POST, as the browser does) -> the result it
redirects to (which shows the question's run, from the sandbox, as in production) -> the progress
page. At 10, 50 and 200 concurrent learners, the rounds of the three servers alternate, so
whatever else the machine does weighs on all alike. For each: server CPU per request (read from
/proc for every process of the server: the web's own, and the sandbox's beside it), requests/s,
p50/p99, and the ratios to the bare app and to SQLite. A third reference, the "floor", is the bare
app behind ampquiz's middleware, with one SQLite read on a page thread and a small Jinja page: what
any page of this kind costs before it does anything of its own (`floor_app`).

Before measuring, learners walk the whole bank on each server (not measured, but its cost is
printed), so every question's run has been made once and every web process has served every
question: runs are shared by every learner and kept per question, so a steady class never waits
for them; what the sandbox spends during the rounds is printed anyway.

Targets (2-core CPU): server CPU per learner request <= 1 ms; throughput >= 0.3x the bare app's;
p99 at 200 learners < 250 ms; PostgreSQL throughput >= SQLite's.
Usage: `python bench/learners.py [--learners 10,50,200] [--requests 2400] [--processes N] [--history N]
[--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test | --no-postgres] [--baseline DIR]`
(`--baseline DIR`: a tree of an earlier commit, served on each database beside this one, for before/after).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# bench/http.py would shadow the standard library's `http` package: the repository root replaces
# this file's folder on sys.path.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

import httpx
from starlette.requests import Request  # floor_app's route: FastAPI reads the annotation here

from bench._stats import line, p50, percentile
from bench.http import Connection, free_port, new_event_loop, start_server, stop_server

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
WALKERS_PER_PROCESS = 8
"""Learners walking the whole bank at once before measuring, per web process (see
`walk_every_process`)."""
TICKS = os.sysconf("SC_CLK_TCK")


def bare_app():
    """The baseline: FastAPI's smallest useful page, under the same uvicorn as ampquiz."""
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    app = FastAPI()

    @app.get("/")
    async def hello() -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>hello</title><p>hello</p>")

    return app


FLOOR_PAGE = "<!doctype html><title>{{ title }}</title><p>{{ learner }}: {{ value }}</p>"


def floor_app():
    """The least a learner's page can cost here: the bare app behind ampquiz's own middleware (the
    learner's cookie, the security headers, the same-origin check, the body limit), one one-row
    SQLite read on a page thread (as ampquiz reads, off the event loop) and a small Jinja page.
    What a page does beyond this is ampquiz's own work; what this costs beside the bare app is the
    price of any page that reads a database and is rendered from a template."""
    import concurrent.futures
    import sqlite3
    import threading

    import jinja2
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    from app.web.middleware import BodyLimit, LearnerCookie, SameOrigin, SecurityHeaders

    database = Path(tempfile.mkdtemp()) / "floor.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE standing (learner TEXT PRIMARY KEY, answered INTEGER)")
    page = jinja2.Environment(autoescape=True).from_string(FLOOR_PAGE)
    threads = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="page")
    local = threading.local()

    def answered(learner: str) -> int:
        conn = getattr(local, "conn", None) or sqlite3.connect(database)
        local.conn = conn
        row = conn.execute("SELECT answered FROM standing WHERE learner = ?", (learner,)).fetchone()
        return row[0] if row else 0

    app = FastAPI()
    app.add_middleware(BodyLimit, max_bytes=1 << 20)
    app.add_middleware(LearnerCookie, secret_key="b" * 40)
    app.add_middleware(SameOrigin)
    app.add_middleware(SecurityHeaders)

    @app.get("/")
    async def floor(request: Request) -> HTMLResponse:
        learner = request.state.learner_id
        value = await asyncio.get_running_loop().run_in_executor(threads, answered, learner)
        return HTMLResponse(page.render(title="floor", learner=learner, value=value))

    return app


def start_bare(
    processes: int, factory: str = "bench.learners:bare_app"
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    args = ["--factory", factory, "--port", str(port), "--no-access-log", "--log-level", "warning"]
    if processes > 1:
        args += ["--workers", str(processes)]
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", *args], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop_server(proc)  # uvicorn's parent, which stops its workers (they outlive a killed parent)
    raise SystemExit(f"the reference app {factory} did not start")


# ---- CPU time of a server: every process under it, read from /proc -----------------------------


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def cpu_seconds(root: int) -> dict[str, float]:
    """CPU time (user + system) of `root` and every process under it, as {"web", "sandbox"}: a
    process whose command line names the sandbox (its zygote, and the runners forked from it)
    counts as the sandbox's. Children already reaped count in their parent's cutime/cstime."""
    out = {"web": 0.0, "sandbox": 0.0}
    todo, seen = [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        times = _cpu_ticks(pid)
        if times is None:
            continue
        out["sandbox" if b"sandbox" in _cmdline(pid) else "web"] += sum(times) / TICKS
        todo += _children(pid)
    return out


def database_cpu_seconds() -> float:
    """CPU time (user + system) of the PostgreSQL server's processes on this host (its backends,
    and those already gone, counted in their parent's cutime/cstime): what a request costs the
    database beside the web, on the same cores. Nothing else uses the server during a round."""
    total = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _comm(entry) == "postgres":
            times = _cpu_ticks(int(entry.name))
            total += sum(times) if times is not None else 0
    return total / TICKS


def _comm(entry: Path) -> str:
    try:
        return (entry / "comm").read_text().strip()
    except OSError:
        return ""


def _cpu_ticks(pid: int) -> tuple[int, int, int, int] | None:
    """A process's utime, stime, cutime and cstime (clock ticks), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return utime, stime, cutime, cstime


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# ---- the learners ------------------------------------------------------------------------------


@dataclass
class Round:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    wall: float = 0.0
    failures: int = 0
    cpu: dict[str, float] = field(default_factory=dict)
    shares: dict[int, float] = field(default_factory=dict)
    """Each web process's own CPU in the round (seconds, by pid). Which process takes a
    connection is the kernel's choice, and a burst of connections (a round's first requests,
    after uvicorn closed the idle ones) often lands mostly on one: its throughput is then about
    one core's, whatever the code costs. Printed, so a low figure can be read for what it is."""

    @property
    def all(self) -> list[float]:
        return [ms for kind in self.latencies.values() for ms in kind]

    @property
    def requests(self) -> int:
        return len(self.all)


def form(question: dict) -> bytes:
    """An answer as the browser posts it: the first choice shown, or a guess at the output; half
    the answers are wrong, so review cards are made and moved as they are for real learners."""
    fields = [("submit_id", uuid.uuid4().hex), ("shown_at", f"{time.time():.3f}")]
    if question["kind"] == "multiple_choice":
        fields.append(("choice", "0"))
    else:
        fields.append(("output", "torch.float32"))
    return urlencode(fields).encode()


async def learner(conn: Connection, order: Iterator[dict], budget: list[int], r: Round) -> None:
    """Question -> answer -> result -> progress, round and round, until the round's budget is
    spent, through the bank in `order` (a learner's own, carried on from round to round)."""

    async def timed(
        kind: str, method: str, path: str, body: bytes = b"", expect: tuple[int, ...] = (200,)
    ) -> int:
        t = time.perf_counter()
        status, _page = await conn.request(method, path, body, b"application/x-www-form-urlencoded")
        r.latencies.setdefault(kind, []).append((time.perf_counter() - t) * 1000)
        if status not in expect:
            r.failures += 1
        return status

    while budget[0] > 0:
        budget[0] -= 4
        q = next(order)
        path = f"/questions/{q['id']}"
        await timed("question", "GET", path)
        # Stored, an answer redirects to its result. Practice (this learner missed the question
        # and it has not come back for review: they saw its key) is graded and shown at once,
        # not stored: the result is that response, and the round has one request less.
        if await timed("answer", "POST", path, form(q), expect=(303, 200)) == 303:
            result = conn.location.decode().split("#")[0] or path
            await timed("result", "GET", result)
        else:
            budget[0] += 1
        await timed("progress", "GET", "/progress")


def web_pids(root: int) -> list[int]:
    """The server's web processes: with `serve --processes N`, those its `app.web.server.preload` child
    forked; with one, the serve process itself."""
    workers = [
        pid
        for parent in _children(root)
        if b"app.web.server.preload" in _cmdline(parent)
        for pid in _children(parent)
    ]
    return workers or [root]


def _own_cpu(pid: int) -> float:
    times = _cpu_ticks(pid)
    return 0.0 if times is None else (times[0] + times[1]) / TICKS


async def walk_every_process(
    server: tuple[subprocess.Popen, str], questions: list[dict], walkers: int
) -> tuple[Round, str]:
    """Learners of their own walk the whole bank until every web process has served a share of
    the walk. Which process takes a connection is the kernel's choice, and a burst of new
    connections is often all taken by one (its loop accepts them in one go): the connections
    are opened one at a time, and the walk is repeated (with new ones) while a process served
    less than a third of what the busiest did. Returns the last walk and the CPU split."""
    proc, url = server
    for _ in range(5):
        warmers = Learners(url, walkers, questions)
        try:
            for conn in warmers.conns:
                await conn.request("GET", "/healthz")
                await asyncio.sleep(0.02)
            warm = await warmers.round(walkers, 4 * len(questions) * walkers, proc.pid)
        finally:
            warmers.close()
        spent = list(warm.shares.values())
        split = " / ".join(f"{s:.1f} s" for s in spent)
        if min(spent) >= max(spent) / 3:
            return warm, split
        print(
            line("  a web process served little of the walk", f"{split}: walking again"), flush=True
        )
    return warm, split


class Learners:
    """`n` learners' connections to one server, kept across rounds (as browsers keep theirs)."""

    def __init__(self, url: str, n: int, questions: list[dict]) -> None:
        parsed = httpx.URL(url)
        self.conns = [Connection(parsed.host, parsed.port or 80) for _ in range(n)]
        self.questions = questions
        # Each learner goes on through the bank from round to round, from a place of their own,
        # as a class does: started again each round, every learner met the questions they had
        # just missed again, minutes later, which are practice now (their keys were shown).
        step = max(1, len(questions) // n)
        self.orders = [itertools.cycle(questions[i * step % len(questions):] + questions[: i * step % len(questions)])
                       for i in range(n)]  # fmt: skip

    async def round(self, n: int, requests: int, pid: int) -> Round:
        r = Round()
        budget = [requests]
        before = {**cpu_seconds(pid), "database": database_cpu_seconds()}
        web = {p: _own_cpu(p) for p in web_pids(pid)}
        started = time.perf_counter()
        await asyncio.gather(
            *(learner(c, self.orders[i], budget, r) for i, c in enumerate(self.conns[:n]))
        )
        r.wall = time.perf_counter() - started
        after = {**cpu_seconds(pid), "database": database_cpu_seconds()}
        r.cpu = {k: after[k] - before[k] for k in after}
        r.shares = {p: _own_cpu(p) - spent for p, spent in web.items()}
        return r

    def close(self) -> None:
        for c in self.conns:
            c.close()


async def bare_round(conns: list[Connection], requests: int, pid: int) -> Round:
    r = Round()
    budget = [requests]
    latencies: list[float] = []

    async def client(conn: Connection) -> None:
        while budget[0] > 0:
            budget[0] -= 1
            t = time.perf_counter()
            status, _ = await conn.request("GET", "/")
            latencies.append((time.perf_counter() - t) * 1000)
            r.failures += status != 200

    before = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(client(c) for c in conns))
    r.wall = time.perf_counter() - started
    after = cpu_seconds(pid)
    r.cpu = {k: after[k] - before[k] for k in after}
    r.latencies["hello"] = latencies
    return r


# ---- PostgreSQL: a database of this run's own -------------------------------------------------


def make_postgres_database(server: str) -> tuple[str, str]:
    from sqlalchemy import create_engine, make_url, text

    name = f"ampquiz_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return name, make_url(server).set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(server: str, name: str) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


# ---- the run ----------------------------------------------------------------------------------


def serve_args(processes: int | None) -> tuple[str, ...]:
    if processes is None:
        return ()
    help_text = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--help"], cwd=ROOT,
                               capture_output=True, text=True, check=False).stdout  # fmt: skip
    if "--processes" not in help_text:
        raise SystemExit(
            "this ampquiz serve has no --processes option yet: run without --processes"
        )
    return ("--processes", str(processes))


def bank_questions() -> list[dict]:
    from app.bank import load_bank

    bank = load_bank(ROOT / "questions")
    return [{"id": q.id, "kind": q.question.kind} for q in bank.questions]


def describe(label: str, r: Round, bare: Round | None = None, versus: Round | None = None,
             baseline: Round | None = None) -> list[str]:  # fmt: skip
    per_req = 1000 * r.cpu["web"] / max(1, r.requests)
    sandbox = 1000 * r.cpu["sandbox"] / max(1, r.requests)
    rate = r.requests / r.wall
    # PostgreSQL's own processes share the cores (SQLite's work is in the web's CPU already).
    database = (
        f"   PostgreSQL server CPU {1000 * r.cpu['database'] / max(1, r.requests):5.2f} ms/req"
        if "PostgreSQL" in label
        else ""
    )
    out = [line(label, f"{rate:7.0f} req/s   p50 {p50(r.all):6.1f} ms   p99 {percentile(r.all, 99):6.1f} ms   "
                       f"web CPU {per_req:5.2f} ms/req   sandbox CPU {sandbox:5.2f} ms/req{database}"
                       + (f"   {r.failures} failed" if r.failures else ""))]  # fmt: skip
    if len(r.latencies) > 1:
        out.append(
            line(
                "",
                "p99 by step: "
                + ", ".join(f"{k} {percentile(v, 99):.0f} ms" for k, v in r.latencies.items()),
            )
        )
    if len(r.shares) > 1 and (spent := sum(r.shares.values())) > 0:
        out.append(line("", "web processes' shares of the CPU: "
                        + " / ".join(f"{100 * v / spent:.0f} %" for v in sorted(r.shares.values(), reverse=True))))  # fmt: skip
    ratios = []
    if bare is not None:
        ratios.append(f"throughput {rate / (bare.requests / bare.wall):.2f}x the bare app's")
        ratios.append(f"CPU/req {per_req / (1000 * bare.cpu['web'] / max(1, bare.requests)):.1f}x")
    if versus is not None:
        ratios.append(f"throughput {rate / (versus.requests / versus.wall):.2f}x SQLite's")
    if baseline is not None:
        before = 1000 * baseline.cpu["web"] / max(1, baseline.requests)
        ratios.append(
            f"web CPU/req {per_req / before:.2f}x the baseline's, throughput {rate / (baseline.requests / baseline.wall):.2f}x"
        )
    if ratios:
        out.append(line("", "; ".join(ratios)))
    return out


REFERENCES = ("bare", "floor")
"""The reference apps measured beside the learners' servers (`bare_app`, `floor_app`)."""


async def measure(args: argparse.Namespace, servers: dict[str, tuple[subprocess.Popen, str]],
                  references: dict[str, tuple[subprocess.Popen, str]], questions: list[dict]) -> dict[int, dict[str, Round]]:  # fmt: skip
    most = max(args.learners)
    learners = {name: Learners(url, most, questions) for name, (_, url) in servers.items()}
    clients = {name: [Connection(httpx.URL(url).host, httpx.URL(url).port or 80) for _ in range(most)]
               for name, (_, url) in references.items()}  # fmt: skip
    results: dict[int, dict[str, Round]] = {}
    processes = {name: web_pids(proc.pid) for name, (proc, _) in servers.items()}
    try:
        for name, group in learners.items():  # every question's run made once, and every cookie
            t = time.perf_counter()
            # Each web process keeps what it made of a question once (its rendered prompt and
            # code, the "What if" cards' check of the code): the bank is walked by enough
            # learners at once that every process serves all of it (which process takes a
            # connection is the kernel's choice). That first walk's cost is printed, not hidden.
            # They are learners of their own, not the measured ones: a learner who answered the
            # whole bank has the largest progress page, and at 10 learners all would be such.
            warm, split = await walk_every_process(
                servers[name], questions, WALKERS_PER_PROCESS * args.web_processes
            )
            # The measured learners' own first answers (--history: that many each, before measuring).
            await group.round(most, 4 * most * max(1, args.history), servers[name][0].pid)
            print(line(f"warm-up on {name}: the bank walked", f"{time.perf_counter() - t:5.1f} s, "
                       f"web CPU {1000 * warm.cpu['web'] / max(1, warm.requests):.2f} ms/req "
                       f"(per web process: {split}), sandbox CPU {warm.cpu['sandbox']:.1f} s, "
                       f"{warm.failures} failed"), flush=True)  # fmt: skip
        for name, conns in clients.items():  # each connection's first request (and cookie)
            await bare_round(conns, 2 * most, references[name][0].pid)
        for n in args.learners:
            rounds: dict[str, list[Round]] = {
                **{name: [] for name in references},
                **{name: [] for name in learners},
            }
            per = args.requests // args.rounds
            order = list(learners.items())
            for turn in range(args.rounds):
                for name, conns in clients.items():
                    rounds[name].append(await bare_round(conns[:n], per, references[name][0].pid))
                # Each round starts with another server: the one measured right after the bare
                # app did worse at 200 learners even against a copy of its own code.
                for name, group in order[turn % len(order) :] + order[: turn % len(order)]:
                    rounds[name].append(await group.round(n, per, servers[name][0].pid))
            results[n] = {name: merge(rs) for name, rs in rounds.items()}
            report(n, results[n])
            replaced(servers, processes)
    finally:
        for group in learners.values():
            group.close()
        for conns in clients.values():
            for c in conns:
                c.close()
    return results


def replaced(
    servers: dict[str, tuple[subprocess.Popen, str]], processes: dict[str, list[int]]
) -> None:
    """Says so when a server's web processes are not the ones it started with: one that died was
    replaced by a cold one, and what was measured since is not a warm server's."""
    for name, (proc, _) in servers.items():
        now = web_pids(proc.pid)
        if sorted(now) != sorted(processes[name]):
            print(line(f"  WARNING: {name}'s web processes changed", f"{processes[name]} -> {now}: "
                       "one died and was replaced; these figures are not a warm server's"))  # fmt: skip
            processes[name] = now


def merge(rounds: list[Round]) -> Round:
    out = Round()
    for r in rounds:
        for kind, ms in r.latencies.items():
            out.latencies.setdefault(kind, []).extend(ms)
        out.wall += r.wall
        out.failures += r.failures
        for k, v in r.cpu.items():
            out.cpu[k] = out.cpu.get(k, 0.0) + v
        for pid, v in r.shares.items():
            out.shares[pid] = out.shares.get(pid, 0.0) + v
    return out


def report(n: int, rounds: dict[str, Round]) -> None:
    print(f"\n{n} concurrent learners")
    bare = rounds["bare"]
    for text in describe("  bare FastAPI hello", bare):
        print(text)
    for text in describe("  floor: middleware, a read, a page", rounds["floor"], bare):
        print(text)
    for name, r in rounds.items():
        if name not in REFERENCES:
            sqlite = "SQLite, baseline" if name.endswith("baseline") else "SQLite"
            for text in describe(
                f"  learners on {name}",
                r,
                bare,
                rounds.get(sqlite) if name != sqlite else None,
                baseline=rounds.get(f"{name}, baseline"),
            ):
                print(text)
    sys.stdout.flush()


def verdicts(results: dict[int, dict[str, Round]]) -> None:
    print()
    mine = {n: {k: r for k, r in rs.items() if "baseline" not in k} for n, rs in results.items()}
    results = mine
    worst_cpu = max(
        1000 * r.cpu["web"] / r.requests
        for rs in results.values()
        for k, r in rs.items()
        if k not in REFERENCES
    )
    print(
        line(
            "target: web CPU per learner request <= 1 ms",
            f"{'met' if worst_cpu <= 1 else 'MISSED'} (worst {worst_cpu:.2f} ms)",
        )
    )
    ratio = min(r.requests / r.wall / (rs["bare"].requests / rs["bare"].wall)
                for rs in results.values() for k, r in rs.items() if k not in REFERENCES)  # fmt: skip
    floor = min(
        rs["floor"].requests / rs["floor"].wall / (rs["bare"].requests / rs["bare"].wall)
        for rs in results.values()
    )
    print(line("target: throughput >= 0.3x the bare app's", f"{'met' if ratio >= 0.3 else 'MISSED'} (lowest {ratio:.2f}x; "
               f"the floor alone: {floor:.2f}x)"))  # fmt: skip
    if 200 in results:
        p99 = max(percentile(r.all, 99) for k, r in results[200].items() if k not in REFERENCES)
        print(
            line(
                "target: p99 at 200 learners < 250 ms",
                f"{'met' if p99 < 250 else 'MISSED'} ({p99:.0f} ms)",
            )
        )
    if all("PostgreSQL" in rs and "SQLite" in rs for rs in results.values()):
        pg = min(rs["PostgreSQL"].requests / rs["PostgreSQL"].wall / (rs["SQLite"].requests / rs["SQLite"].wall)
                 for rs in results.values())  # fmt: skip
        print(
            line(
                "target: PostgreSQL throughput >= SQLite's",
                f"{'met' if pg >= 1 else 'MISSED'} (lowest {pg:.2f}x)",
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--learners", default="10,50,200", help="concurrent learners, comma-separated")
    ap.add_argument("--requests", type=int, default=2400, help="requests per server at each level")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per level")
    ap.add_argument(
        "--processes", type=int, default=None, help="passed to `ampquiz serve --processes N`"
    )
    ap.add_argument("--history", type=int, default=0,
                    help="answers each measured learner gives before measuring (a class well into the bank: its progress "
                         "pages are the largest); the default measures learners who have barely started")  # fmt: skip
    ap.add_argument(
        "--postgres",
        default=POSTGRES,
        help="PostgreSQL server (a database is made there and dropped)",
    )
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--only", choices=["SQLite", "PostgreSQL"], help="measure one database only")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a tree of an earlier commit (e.g. from `git archive REV | tar -x -C DIR`): its server, on "
                         "each database measured, beside this one")  # fmt: skip
    args = ap.parse_args()
    args.learners = [int(n) for n in args.learners.split(",")]
    args.web_processes = args.processes or len(os.sched_getaffinity(0))
    extra = serve_args(args.processes)
    questions = bank_questions()
    print(f"host: {os.cpu_count()} cores; {len(questions)} questions; server processes: "
          f"{args.processes or 'the default (one per core)'}; {args.requests} requests per server per level")  # fmt: skip

    pg_name = pg_baseline_name = None
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    references: dict[str, tuple[subprocess.Popen, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if args.only != "PostgreSQL":
                (Path(tmp) / "sqlite").mkdir()
                servers["SQLite"] = start_server(Path(tmp) / "sqlite", 2, 16, serve_args=extra)
            if not args.no_postgres and args.only != "SQLite":
                pg_name, pg_url = make_postgres_database(args.postgres)
                (Path(tmp) / "pg").mkdir()
                os.environ["AMPQUIZ_SECRET_KEY"] = (
                    "bench-secret-key-of-the-right-length-0123456789"  # no SQLite folder to keep it in
                )
                servers["PostgreSQL"] = start_server(
                    Path(tmp) / "pg", 2, 16, database_url=pg_url, serve_args=extra
                )
            if args.baseline is not None:  # the earlier commit on each database measured
                source = args.baseline.resolve()
                if "SQLite" in servers:
                    (Path(tmp) / "baseline").mkdir()
                    servers["SQLite, baseline"] = start_server(
                        Path(tmp) / "baseline", 2, 16, serve_args=extra, source=source
                    )
                if "PostgreSQL" in servers:
                    pg_baseline_name, pg_baseline_url = make_postgres_database(args.postgres)
                    (Path(tmp) / "pg-baseline").mkdir()
                    servers["PostgreSQL, baseline"] = start_server(Path(tmp) / "pg-baseline", 2, 16, database_url=pg_baseline_url,
                                                                   serve_args=extra, source=source)  # fmt: skip
            references["bare"] = start_bare(args.web_processes)
            references["floor"] = start_bare(args.web_processes, "bench.learners:floor_app")
            loop = new_event_loop()
            try:
                results = loop.run_until_complete(measure(args, servers, references, questions))
            finally:
                loop.close()
            verdicts(results)
        finally:
            for proc, _ in servers.values():
                stop_server(proc)
            for proc, _ in references.values():
                stop_server(proc)
            for name in (pg_name, pg_baseline_name):
                if name is not None:
                    drop_postgres_database(args.postgres, name)


if __name__ == "__main__":
    main()
