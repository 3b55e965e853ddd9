"""The web's bounded queue in front of the sandbox: runs snippets without blocking the event loop.

`Sandbox.run` blocks a thread while the snippet runs, so the queue hands runs to a thread pool as
wide as the sandbox (the server's event loop never waits). Up to `queue` more runs wait their turn;
beyond that `QueueFull` says when to come back (the web turns it into 429 + Retry-After), instead
of letting waiting requests pile up without bound. No FastAPI here.

(The sandbox's "runner" is the process that runs one snippet; this is the queue in front of them.)
"""

from __future__ import annotations

import asyncio
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from sandbox import Limits, RunResult


class Pool(Protocol):
    """What the queue needs of a sandbox: the local pool, or a client of remote workers."""

    environment: dict[str, Any]

    def run(
        self,
        code: str,
        limits: Limits | None = None,
        *,
        explain: bool = False,
        device: str | None = None,
    ) -> RunResult: ...


class QueueFull(Exception):
    """Every worker is busy and the queue is full."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"every sandbox worker is busy and {retry_after_s} s is a fair wait")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Load:
    workers: int
    queue: int
    in_flight: int
    """Runs running or waiting."""


def retry_after_s(in_flight: int, capacity: int, workers: int, mean_run_s: float) -> int:
    """Whole seconds until a retry finds room: the runs that must end first (one, when the queue
    is just full), ending at the measured rate of `workers / mean_run_s` runs a second (the mean
    time a run holds its worker); at least 1 s."""
    must_end = max(1, in_flight - capacity + 1)
    return max(1, math.ceil(must_end * mean_run_s / workers))


class RunQueue:
    """Runs snippets without blocking the event loop, within `workers + queue` at once."""

    def __init__(self, pool: Pool, *, workers: int, queue: int, limits: Limits) -> None:
        self.pool = pool
        self.workers = workers
        self.queue = queue
        self.limits = limits
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-run")
        self._in_flight = 0
        self._mean_s = 0.05
        self._measured = False
        """Moving average of how long a run holds its worker (not counting its wait in the
        queue: with that in, a full queue would inflate its own estimate), for Retry-After."""
        self._changed: asyncio.Event | None = None

    @property
    def environment(self) -> dict[str, Any]:
        return self.pool.environment

    @property
    def has_cuda(self) -> bool:
        return self.pool.environment.get("device_kind") == "cuda"

    @property
    def has_idle_worker(self) -> bool:
        return self._in_flight < self.workers

    def load(self) -> Load:
        return Load(self.workers, self.queue, self._in_flight)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def retry_after_s(self) -> int:
        return retry_after_s(self._in_flight, self.workers + self.queue, self.workers, self._mean_s)

    async def spare_worker(self) -> None:
        """Returns once a background run may start without a learner ever waiting for it: while
        another worker stays free (with one worker: when it is idle)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        while self._in_flight > max(0, self.workers - 2):
            self._changed.clear()
            await self._changed.wait()

    async def run(
        self,
        code: str,
        *,
        explain: bool = False,
        device: str | None = None,
        subject: str = "This snippet",
        limits: Limits | None = None,
        background: bool = False,
    ) -> RunResult:
        """Runs `code` in the sandbox; raises QueueFull when workers and queue are all taken.
        `subject` names the code in the answer a CUDA-only snippet gets on a host without a GPU.
        A `background` run (proving a key) is not counted against the queue's room for learners
        and leaves the mean run time alone; call `spare_worker()` first."""
        if device == "cuda" and not self.has_cuda:
            return RunResult.needs_cuda(self.pool.environment, subject)  # at once: no worker needed
        if not background and self._in_flight >= self.workers + self.queue:
            raise QueueFull(self.retry_after_s())
        self._in_flight += 1
        loop = asyncio.get_running_loop()
        chosen = limits or self.limits
        held = [0.0]

        def on_worker() -> RunResult:
            started = time.perf_counter()
            try:
                return self.pool.run(code, chosen, explain=explain, device=device)
            finally:
                held[0] = time.perf_counter() - started

        future = loop.run_in_executor(self._executor, on_worker)

        def done(_: object) -> None:
            # Counted down when the sandbox is done, not when the client gives up: a run
            # abandoned by its client still holds its worker.
            self._in_flight -= 1
            if not background and held[0]:
                self._mean_s = 0.8 * self._mean_s + 0.2 * held[0] if self._measured else held[0]
                self._measured = True
            if self._changed is not None:
                self._changed.set()

        future.add_done_callback(done)
        return await asyncio.shield(future)
