"""The web's side of remote runs and real `ampquiz worker` processes, for every test here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.runs.remote import RemoteRuns
from tests.support.workers import NATS_URL, Start, WorkerProcess, remote_settings, reset_stream


@pytest.fixture(scope="session", autouse=True)
def _stream_dropped_at_the_end() -> Iterator[None]:
    """This run's stream (its deployment's, see `NATS_URL`) does not outlive it on the server."""
    yield
    asyncio.run(reset_stream())


@pytest.fixture
async def web() -> AsyncIterator[RemoteRuns]:
    """The web's side of remote runs, as `AMPQUIZ_WORKERS_URL=nats://…` makes it."""
    await reset_stream()  # no runs left over from an earlier test
    runs = await RemoteRuns.connect(NATS_URL, remote_settings(), discover_s=0.3)
    yield runs
    await runs.close()


@pytest.fixture
def start(tmp_path: Path, web: RemoteRuns) -> Iterator[Start]:
    """Starts `n` workers and waits until the web hears them; every one is stopped afterwards."""
    started: list[WorkerProcess] = []

    async def start_workers(n: int = 1, slots: int = 1) -> list[WorkerProcess]:
        new = [WorkerProcess(tmp_path, slots=slots, name=str(len(started) + i)) for i in range(n)]
        started.extend(new)
        for w in new:
            await w.wait_online(web)
        return new

    yield start_workers
    for w in started:
        w.stop()
