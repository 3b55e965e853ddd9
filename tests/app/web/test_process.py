"""`app.web.server.process`, what each process of `serve --processes N` imports: it starts on the cores
`serve` names, with no cyclic garbage collection, and has every core and the collector back
once its app is built (a real process; about two seconds). `serve --processes N`'s web
processes are forked by `app.web.server.preload`, which keeps them alive."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.processes import (
    children,
    cmdline,
    eventually_empty,
    processes_with_environment,
    web_processes,
)
from tests.support.server import BANK, Server

CHILD = """
import gc, json, os
import app.web.server.process as process
during = (sorted(os.sched_getaffinity(0)), gc.isenabled())
process.create_app()
print(json.dumps({"during": during, "after": (sorted(os.sched_getaffinity(0)), gc.isenabled())}))
"""


@pytest.mark.skipif(
    len(getattr(os, "sched_getaffinity", lambda _pid: ())(0)) < 2, reason="needs two cores"
)
def test_a_web_process_starts_on_the_cores_it_is_given_and_then_has_them_all(
    tmp_path: Path,
) -> None:
    cores = sorted(os.sched_getaffinity(0))
    env = {**os.environ, "_AMPQUIZ_STARTUP_CPUS": str(cores[0]), "AMPQUIZ_BANK": str(BANK),
           "AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["during"] == [[cores[0]], False]
    assert seen["after"] == [cores, True]


def _is_web_process(pid: int) -> bool:
    return "app.web.server.preload" in cmdline(pid)  # forked from it: the same command line


def _wait_for(what: str, check, seconds: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return found


def _two_web_processes(server: Server) -> list[int]:
    assert server.proc is not None
    # /healthz answers as soon as one web process is up: the other may still be starting.
    return _wait_for(
        "two web processes", lambda: len(w := web_processes(server.proc.pid)) == 2 and w
    )


def _gone(pids: list[int]) -> None:
    try:
        assert eventually_empty(lambda: [p for p in pids if _is_web_process(p)], 15) == []
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _start_in_the_background(server: Server) -> None:
    """Starts `serve` as a shell script's `serve &` does: SIGINT ignored, which it inherits."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        server.start()
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture
def two_processes(tmp_path: Path) -> Iterator[Server]:
    """`serve --processes 2`, to start; killed outright if a test ends with it still running (one
    that failed half-way), which takes all its processes with it (see the first test below)."""
    server = Server(tmp_path, args=("--processes", "2"))
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait()


def test_the_web_processes_start_on_a_fresh_database_and_go_when_serve_is_killed(
    two_processes: Server,
) -> None:
    """Both web processes start at the first try on a database that does not exist yet (they
    once raced to make the same table: one died, and uvicorn started another, cold, seconds
    later). One that dies is replaced by a new fork, and the server keeps answering. And `serve`
    killed outright (the OOM killer, `kill -9`) leaves no web process behind: they would
    otherwise keep the port (the next `serve` cannot start) and keep saying all is well beside a
    sandbox pool gone with `serve`."""
    server = two_processes
    server.start()
    assert server.proc is not None
    web = _two_web_processes(server)
    time.sleep(1)  # a process that failed is noticed by uvicorn within half a second
    log = server.log.read_text()
    assert "Traceback" not in log and "died" not in log, log[-3000:]
    assert web_processes(server.proc.pid) == web

    os.kill(web[0], signal.SIGKILL)
    now = _wait_for(
        "a new web process",
        lambda: len(w := web_processes(server.proc.pid)) == 2 and web[0] not in w and w,
    )
    assert web[1] in now
    for _ in range(20):  # whichever process takes the connection, each answers
        assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200

    parent = children(server.proc.pid, "app.web.server.preload")
    server.proc.kill()
    server.proc.wait()
    _gone(now + parent)


def test_serve_ends_with_an_error_when_the_web_processes_parent_is_killed(
    two_processes: Server,
) -> None:
    """The process the web processes are forked from, killed outright: they go with it, and
    `serve` ends saying so (with an error status a supervisor sees), its sandbox pool with it."""
    server = two_processes
    server.start()
    assert server.proc is not None
    web = _two_web_processes(server)
    zygotes = children(server.proc.pid, "sandbox.zygote")
    assert zygotes
    (parent,) = children(server.proc.pid, "app.web.server.preload")
    os.kill(parent, signal.SIGKILL)
    assert server.proc.wait(timeout=30) == 1
    assert "the web processes' parent ended (signal 9)" in server.log.read_text()
    _gone(web)
    assert (
        eventually_empty(lambda: [p for p in zygotes if "sandbox.zygote" in cmdline(p)], 15) == []
    )


def test_a_second_serve_on_the_port_is_refused_and_serve_started_in_the_background_stops_on_sigterm(
    two_processes: Server, tmp_path: Path
) -> None:
    """A second `serve` on a port already served is refused, saying why, and leaves the first
    alone. And `serve` started from a script in the background (SIGINT ignored, as a shell does
    for `serve &`) still stops on SIGTERM, its web processes with it (it once ran on: it turned SIGTERM into
    SIGINT, and only SIGKILL ended it), and a second SIGTERM does not break off the stop."""
    server = two_processes
    _start_in_the_background(server)
    assert server.proc is not None
    web = _two_web_processes(server)

    for processes in ("2", "1"):
        second = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--processes", processes], env=server.env,
                                cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert second.returncode == 1, (processes, second.stderr)
        assert "address already in use" in second.stderr.lower(), second.stderr
        assert "serving on" not in second.stderr, (
            second.stderr
        )  # said once the port is held, never here
        assert (
            second.stderr.splitlines()[-1]
            == f"ampquiz serve: cannot serve on {server.url}/ (why is above)"
        ), second.stderr
    assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200

    parent = children(server.proc.pid, "app.web.server.preload")
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # (two signals much closer than this are taken as one)
    server.proc.send_signal(signal.SIGTERM)  # asked again while stopping: the stop goes on
    assert server.proc.wait(timeout=30) == 0
    assert "Traceback" not in server.log.read_text()
    _gone(web + parent)


def test_serve_with_one_process_stops_on_sigterm_with_status_0_and_its_sandbox_with_it(
    tmp_path: Path,
) -> None:
    """One process, started from a script in the background (SIGINT ignored): SIGTERM, a
    supervisor's stop, ends it as cleanly as with several processes: status 0, where it used to
    die of the signal uvicorn raised again after its graceful stop (143 in a shell, a failure to
    a supervisor that reads statuses), and no sandbox process left behind."""
    server = Server(tmp_path)
    _start_in_the_background(server)
    assert server.proc is not None
    zygotes = children(server.proc.pid, "sandbox.zygote")
    assert zygotes
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    assert "Traceback" not in server.log.read_text()
    assert (
        eventually_empty(lambda: [p for p in zygotes if "sandbox.zygote" in cmdline(p)], 15) == []
    )


@pytest.mark.parametrize("processes", ["1", "2"])
def test_serve_that_cannot_open_its_database_says_why_in_a_line_and_leaves_nothing_running(
    processes: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A database that does not exist, a server that never answers, or a SQLite file where no folder can be made: one line
    saying which database and why (the password hidden, in the URL's user part or its options;
    a driver not installed is such a reason too), an error status, and no traceback
    from each process, nor any process left behind; nor a "serving on" line before it."""
    from sqlalchemy import make_url

    from tests.support.postgres import POSTGRES_SERVER

    missing = (
        make_url(POSTGRES_SERVER)
        .set(database="ampquiz_no_such_database")
        .render_as_string(hide_password=False)
    )
    silent = socket.create_server(
        ("127.0.0.1", 0)
    )  # accepts connections, never answers: a stuck server
    request.addfinalizer(silent.close)
    stuck = f"postgresql+psycopg://learner@127.0.0.1:{silent.getsockname()[1]}/db"
    for url, why in [(missing, 'database "ampquiz_no_such_database" does not exist'),
                     (stuck, "timeout expired"),  # after the default connect timeout, not never
                     (f"sqlite:///{tmp_path / 'file' / 'sub' / 'db.sqlite'}", "Not a directory"),
                     ("mysql://learner:s3cret@127.0.0.1/x", "No module named"),  # a driver not installed
                     (f"{missing}?password=s3cret&sslmode=bogus", 'invalid sslmode value: "bogus"')]:  # fmt: skip
        (tmp_path / "file").write_text("a file where a folder should be")
        env = {
            **Server(tmp_path).env,
            "AMPQUIZ_DATABASE_URL": url,
            "AMPQUIZ_SECRET_KEY": "tests-secret-key-of-the-right-length-0123456789",
        }
        out = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--processes", processes], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert out.returncode == 1, out.stderr
        assert "Traceback" not in out.stderr and "serving on" not in out.stderr, out.stderr[-3000:]
        (said,) = [line for line in out.stderr.splitlines() if line.startswith("ampquiz serve: ")]
        assert said.startswith("ampquiz serve: cannot open the database ") and why in said, said
        assert "s3cret" not in out.stderr
        assert eventually_empty(lambda: processes_with_environment(str(tmp_path))) == []


def test_a_web_process_that_cannot_start_stops_serve_with_why_instead_of_starting_again_and_again(
    tmp_path: Path,
) -> None:
    """A database that serve could open but that refuses the web processes' own connections (a
    role allowed two at once: serve's check takes two and gives them back, then each web process
    wants its own): each process that cannot start says why in a line, serve stops with an error
    status and nothing left running. It was a crash loop: each process started again twice a
    second, a traceback each time, the port open and never answered, serve's status never set."""
    from sqlalchemy import make_url

    from tests.support.postgres import POSTGRES_SERVER, as_admin

    name = f"ampquiz_limited_{os.getpid()}"
    as_admin(
        f'CREATE ROLE "{name}" LOGIN CONNECTION LIMIT 2', f'CREATE DATABASE "{name}" OWNER "{name}"'
    )
    try:
        url = (
            make_url(POSTGRES_SERVER)
            .set(username=name, database=name)
            .render_as_string(hide_password=False)
        )
        env = {
            **Server(tmp_path).env,
            "AMPQUIZ_DATABASE_URL": url,
            "AMPQUIZ_SECRET_KEY": "tests-secret-key-of-the-right-length-0123456789",
        }
        out = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--processes", "2"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert out.returncode == 1, out.stderr[-3000:]
        assert "Traceback" not in out.stderr, out.stderr[-3000:]
        said = [line for line in out.stderr.splitlines() if line.startswith("ampquiz")]
        assert any(line.startswith("ampquiz: a web process could not start: cannot open the database ")
                   and "too many connections" in line for line in said), said  # fmt: skip
        assert (
            said[-1]
            == "ampquiz serve: stopped, as the web processes could not start (why is above)"
        ), said
        assert eventually_empty(lambda: processes_with_environment(str(tmp_path))) == []
    finally:
        as_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'DROP ROLE IF EXISTS "{name}"')


def test_serve_does_not_end_as_if_all_went_well_when_its_web_processes_parent_stopped_before_starting_them(
    tmp_path: Path,
) -> None:
    """The process the web processes are forked from waits for serve's word (the database
    open) before forking them; stopped alone meanwhile (Ctrl+C sent to it only), it had ended
    with status 0, and serve then said "serving on" and ended with 0, nothing ever served."""
    import fcntl

    server = Server(tmp_path, args=("--processes", "2"))
    database = tmp_path / "data" / "ampquiz.db"
    database.parent.mkdir(parents=True)
    with open(f"{database}-writer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # serve's opening of the database waits for this
        with open(tmp_path / "serve.log", "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--processes", "2"], env=server.env,
                                    cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        try:

            def waiting_to_be_told() -> list[int]:
                return [pid for pid in children(proc.pid, "app.web.server.preload")
                        if "pipe_read" in Path(f"/proc/{pid}/wchan").read_text()]  # fmt: skip

            (parent,) = _wait_for(
                "the web processes' parent waiting for serve's word", waiting_to_be_told, 90
            )
            os.kill(parent, signal.SIGINT)
            _wait_for("it ended", lambda: not cmdline(parent), 30)
        except BaseException:
            proc.terminate()  # failed: leave no server behind (one kept serving after such a failure)
            raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        code = proc.wait(timeout=60)
    said = (tmp_path / "serve.log").read_text()
    assert code == 1, said
    assert "the web processes' parent ended (status 1)" in said and "serving on" not in said, said
    assert eventually_empty(lambda: processes_with_environment(str(tmp_path))) == []


def test_a_keep_alive_connection_is_closed_after_100_requests_so_a_class_spreads_over_the_processes(
    two_processes: Server,
) -> None:
    """A class connecting at once could all land on one web process and stay there for as long as
    their browsers kept the connections (one core serving everyone, the other idle). A connection
    now serves 100 requests, the last saying `Connection: close`; the browser's next request opens
    a new one, which the process with time to spare takes. No request is cut on the way."""
    import http.client

    from app.web.server.connections import REQUESTS_PER_CONNECTION

    server = two_processes
    server.start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    closing = []
    for i in range(1, REQUESTS_PER_CONNECTION + 2):
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        if (
            response.will_close
        ):  # http.client then closes its end, and reconnects on the next request
            closing.append(i)
    assert closing == [REQUESTS_PER_CONNECTION], closing
    conn.close()
