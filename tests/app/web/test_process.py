"""`app.web.process`, what each process of `serve --processes N` imports: it starts on the cores
`serve` names, with no cyclic garbage collection, and has every core and the collector back
once its app is built (a real process, as uvicorn spawns it; about two seconds)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.server import BANK, Server

CHILD = """
import gc, json, os
import app.web.process as process
during = (sorted(os.sched_getaffinity(0)), gc.isenabled())
process.create_app()
print(json.dumps({"during": during, "after": (sorted(os.sched_getaffinity(0)), gc.isenabled())}))
"""


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _pid: ())(0)) < 2, reason="needs two cores")
def test_a_web_process_starts_on_the_cores_it_is_given_and_then_has_them_all(tmp_path: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    env = {**os.environ, "_AMPQUIZ_STARTUP_CPUS": str(cores[0]), "AMPQUIZ_BANK": str(BANK),
           "AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["during"] == [[cores[0]], False]
    assert seen["after"] == [cores, True]


def _is_web_process(pid: int) -> bool:
    try:
        return "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:  # gone
        return False


def _web_processes_of(serve: int) -> list[int]:
    children = subprocess.run(["pgrep", "-P", str(serve)], capture_output=True, text=True, check=False).stdout
    return [pid for pid in map(int, children.split()) if _is_web_process(pid)]


def test_the_web_processes_start_on_a_fresh_database_and_go_when_serve_is_killed(tmp_path: Path) -> None:
    """Both web processes start at the first try on a database that does not exist yet (they
    once raced to make the same table: one died, and uvicorn started another, cold, seconds
    later). And `serve` killed outright (the OOM killer, `kill -9`) leaves no web process behind:
    uvicorn's would otherwise keep the port (the next `serve` cannot start) and keep saying all
    is well beside a sandbox pool gone with `serve`."""
    server = Server(tmp_path, args=("--processes", "2"))
    server.start()
    assert server.proc is not None
    # /healthz answers as soon as one web process is up: the other may still be starting.
    started = time.monotonic() + 60
    while len(web := _web_processes_of(server.proc.pid)) < 2 and time.monotonic() < started:
        time.sleep(0.2)
    assert len(web) == 2
    time.sleep(1)  # a process that failed is noticed by uvicorn within half a second
    log = server.log.read_text()
    assert "Traceback" not in log and "died" not in log, log[-3000:]
    assert _web_processes_of(server.proc.pid) == web
    server.proc.kill()
    server.proc.wait()
    deadline = time.monotonic() + 15
    try:
        while left := [p for p in web if _is_web_process(p)]:
            assert time.monotonic() < deadline, f"web processes {left} outlived serve"
            time.sleep(0.2)
    finally:
        for pid in web:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
