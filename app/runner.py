"""The web's bounded queue in front of the sandbox pool, and the cache of question runs.

`Sandbox.run` blocks a thread while the snippet runs, so the runner hands runs to a thread pool as
wide as the sandbox (the server's event loop never waits). Up to `queue` more runs wait their turn;
beyond that `QueueFull` says when to come back (the web turns it into 429 + Retry-After), instead
of letting waiting requests pile up without bound. No FastAPI here.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from sandbox import Limits, RunResult
from sandbox.result import Environment

log = logging.getLogger("ampquiz.runner")

# A question's run is kept unless it ended for a reason that may not happen next time.
_TRANSIENT = {"killed", "timeout", "memory"}


class Pool(Protocol):
    """What the runner needs of a sandbox: the local pool, or a client of remote workers."""

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


class Runner:
    """Runs snippets without blocking the event loop, within `workers + queue` at once."""

    def __init__(self, pool: Pool, *, workers: int, queue: int, limits: Limits) -> None:
        self.pool = pool
        self.workers = workers
        self.queue = queue
        self.limits = limits
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-run")
        self._in_flight = 0
        self._mean_s = 0.05
        """Moving average of a run's duration, for Retry-After."""
        self._cache: dict[tuple[str, str | None], RunResult] = {}
        self._pending: dict[tuple[str, str | None], asyncio.Future[RunResult]] = {}
        self._background: set[asyncio.Task[Any]] = set()

    @property
    def environment(self) -> dict[str, Any]:
        return self.pool.environment

    @property
    def has_cuda(self) -> bool:
        return self.pool.environment.get("device_kind") == "cuda"

    def load(self) -> Load:
        return Load(self.workers, self.queue, self._in_flight)

    def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def retry_after_s(self) -> int:
        """Seconds until the queue has probably drained by one worker's share."""
        backlog = max(1, self._in_flight - self.workers + 1)
        return max(1, math.ceil(backlog * self._mean_s / self.workers))

    async def run(
        self, code: str, *, explain: bool = False, device: str | None = None
    ) -> RunResult:
        """Runs `code` in the sandbox; raises QueueFull when workers and queue are all taken."""
        if device == "cuda" and not self.has_cuda:
            return unavailable(self.pool.environment)  # answered at once: no worker needed
        if self._in_flight >= self.workers + self.queue:
            raise QueueFull(self.retry_after_s())
        self._in_flight += 1
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(
            self._executor, lambda: self.pool.run(code, self.limits, explain=explain, device=device)
        )

        def done(_: object) -> None:
            # Counted down when the sandbox is done, not when the client gives up: a run
            # abandoned by its client still holds its worker.
            self._in_flight -= 1
            self._mean_s = 0.8 * self._mean_s + 0.2 * (time.perf_counter() - started)

        future.add_done_callback(done)
        return await asyncio.shield(future)

    # ---- question runs: the code is fixed, so one run per code serves every learner ---------

    def cached(self, code: str, device: str | None) -> RunResult | None:
        return self._cache.get((code, device))

    async def run_cached(self, code: str, device: str | None) -> RunResult:
        """The run of a question's code with explanations, run once and then kept in memory."""
        key = (code, device)
        if key in self._cache:
            return self._cache[key]
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self.run(code, explain=True, device=device))
            self._pending[key] = pending

            def keep(fut: asyncio.Future[RunResult]) -> None:
                self._pending.pop(key, None)
                if (
                    not fut.cancelled()
                    and fut.exception() is None
                    and fut.result().status not in _TRANSIENT
                ):
                    self._cache[key] = fut.result()

            pending.add_done_callback(keep)
        return await asyncio.shield(pending)

    def prefetch(self, code: str, device: str | None) -> None:
        """Starts a question's run while the learner reads it, when a worker is idle anyway."""
        key = (code, device)
        if key in self._cache or key in self._pending or self._in_flight >= self.workers:
            return
        task = asyncio.ensure_future(self.run_cached(code, device))
        self._background.add(task)

        def forget(t: asyncio.Task[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.debug("prefetch failed: %s", t.exception())

        task.add_done_callback(forget)


def unavailable(environment: dict[str, Any]) -> RunResult:
    """What a CUDA-only snippet gets on a host without a GPU: said plainly, never run on the CPU."""
    known = {k: v for k, v in environment.items() if k in Environment.__dataclass_fields__}
    return RunResult(
        status="unavailable",
        message="This question's code needs a CUDA GPU; this server has none.",
        environment=Environment(**known),
    )
