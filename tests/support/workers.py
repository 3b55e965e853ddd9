"""Real `ampquiz worker` processes against the real NATS server on 127.0.0.1:4222."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import nats
import nats.js.errors

from app.runs.jetstream import Layout
from sandbox import Limits
from tests.support.cli import REPO

if TYPE_CHECKING:
    from app.runs.remote import RemoteRuns
    from app.settings import Settings

QUICK = Limits(wall_s=10, cpu_s=10)
Start = Callable[..., Awaitable[list["WorkerProcess"]]]
"""The `start` fixture: starts n workers (of `slots` each) and waits until the web hears them."""

NATS_SERVER = os.environ.get("AMPQUIZ_TEST_NATS_URL", "nats://127.0.0.1:4222")
NATS_URL = f"{NATS_SERVER}/test-{uuid.uuid4().hex[:12]}"
"""This test run's deployment on the NATS server (`app.runs.jetstream.Layout`): another run on
the same host, at the same time, neither takes its runs nor hears its workers."""
LAYOUT = Layout.of(NATS_URL)
WORKERS_KEY = "test-workers-key-" + "k" * 32
"""The secret the tests' web side and workers share (AMPQUIZ_WORKERS_KEY)."""
WORKERS_ENV = {
    "AMPQUIZ_WORKERS_URL": NATS_URL,
    "AMPQUIZ_WORKERS_KEY": WORKERS_KEY,
    "AMPQUIZ_BROKER_INSECURE": "1",
}
"""The shared NATS server has no users: the web and the workers are told that is allowed (the
broker's users and permissions are `tests.support.nats`'s)."""


def remote_settings(url: str = NATS_URL) -> Settings:
    """The settings a web process in remote mode has: the NATS server and the workers' key."""
    from app.settings import Settings

    return Settings(workers_url=url, workers_key=WORKERS_KEY, broker_insecure=True)


class WorkerProcess:
    """`ampquiz worker` as an operator starts it on a sandbox host, configured by AMPQUIZ_*."""

    def __init__(
        self, workdir: Path, slots: int = 1, name: str = "w", env: dict[str, str] | None = None
    ) -> None:
        """`env`: its AMPQUIZ_* broker settings, instead of the shared server's (`WORKERS_ENV`)."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"worker-{name}.log"
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            **(env or WORKERS_ENV),
            "AMPQUIZ_SANDBOX_WORKERS": str(slots),
        }
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "worker"], cwd=workdir, env=env,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.id = ""

    async def wait_online(self, web: RemoteRuns, timeout: float = 90) -> str:
        """Until `web` has heard the worker announce itself; returns its id."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the worker exited: {self.log.read_text()[-3000:]}")
            for w in web.online():
                if w["id"].endswith(f"-{self.proc.pid}"):
                    self.id = w["id"]
                    return self.id
            await asyncio.sleep(0.1)
        raise RuntimeError(f"the worker did not come online: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """As a host losing power would: SIGKILL to the worker and everything it started."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


async def reset_stream() -> None:
    """No runs left over from an earlier test (the stream is re-made by the next web or worker);
    also what a run of the tests leaves on the NATS server at its end."""
    nc = await nats.connect(NATS_SERVER)
    for device in ("cpu", "cuda"):
        with contextlib.suppress(nats.js.errors.NotFoundError):  # not there yet
            await nc.jetstream().delete_stream(LAYOUT.stream(device))
    await nc.close()


def status_of(web: RemoteRuns, worker_id: str) -> dict:
    """What the worker last announced (every second) to `web`."""
    for w in web.online():
        if w["id"] == worker_id:
            return w
    return {"busy": 0, "done": 0}


async def until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Waits for `predicate` (a worker's start or a publish can take seconds on a loaded 2-core host)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


def process_tree(pid: int) -> dict[int, str]:
    """`pid`'s descendants now, each with its start time (so a pid reused later is not mistaken
    for it), found by walking parent links in /proc, not by a name pattern."""
    parents: dict[int, int] = {}
    started: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        parents[int(entry.name)] = int(fields[1])
        started[int(entry.name)] = fields[19]
    tree: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in tree:
                tree[child] = started[child]
                frontier.append(child)
    return tree


def still_running(tree: dict[int, str]) -> list[int]:
    """The processes of `tree` that still run (a zombie, which only waits to be reaped, does not)."""
    alive = []
    for pid, start in tree.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[19] == start and fields[0] != "Z":
            alive.append(pid)
    return alive


def command_lines(pids: list[int]) -> dict[int, str]:
    """What each process runs, for a failure message."""
    lines = {}
    for pid in pids:
        try:
            lines[pid] = (
                Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:100]
            )
        except OSError:
            lines[pid] = "(gone)"
    return lines
