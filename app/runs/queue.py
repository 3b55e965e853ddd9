"""The web's bounded, fair queue in front of the sandbox: runs snippets without blocking the event loop.

Runs go to a `Runs` backend (app.runs: the local pool, a pool shared by this host's web
processes, or remote workers), at most `workers` at once. Up to `queue` more runs wait their turn;
beyond that `QueueFull` says when to come back (the web turns it into 429 + Retry-After), instead
of letting waiting requests pile up without bound. No FastAPI here.

(The sandbox's "runner" is the process that runs one snippet; this is the queue in front of them.)
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, Literal

from app.runs import Runs, RunsFull
from sandbox import Limits, RunResult


class QueueFull(Exception):
    """No room for this run: every worker is busy and the queue is full (`reason="queue"`), or
    this learner or address already has its share of runs going (`"learner"`, `"address"`)."""

    def __init__(self, retry_after_s: int, reason: str = "queue", limit: int = 0) -> None:
        super().__init__(f"no room for the run ({reason}); {retry_after_s} s is a fair wait")
        self.retry_after_s = retry_after_s
        self.reason = reason
        self.limit = limit


Lane = Literal["question", "learner", "background"]
PRIORITY: dict[str, int] = {"question": 0, "learner": 1, "background": 2}
"""Who gets the next free worker: the run shown with an answered question first (it is shared by
every learner who answers it, and never waits behind playground runs), then learners' own runs,
then proving keys in the background."""


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
    """Runs snippets without blocking the event loop. Learners' own runs (the playground, the
    API) are admitted within `workers + queue` at once, and each learner (cookie) and client
    address within its share, so one client cannot fill the queue for everyone; question runs
    and background runs are not counted against that room. A free worker goes to the waiting
    run with the highest priority (`PRIORITY`); within it, to the run whose owners have the
    fewest runs on workers now (an address's before a learner's), then first come first served:
    a client that queued eight long runs no longer makes a newcomer wait for all of them."""

    def __init__(
        self,
        pool: Runs,
        *,
        workers: int,
        queue: int,
        limits: Limits,
        per_learner: int = 2,
        per_address: int = 8,
    ) -> None:
        self.pool = pool
        self.workers = workers
        self.queue = queue
        self.limits = limits
        self.caps = {"learner": per_learner, "address": per_address}
        self._in_flight = 0
        """Admitted runs of every lane, running or waiting."""
        self._learners_in_flight = 0
        self._by_owner: collections.Counter[str] = collections.Counter()
        self._free = workers
        self._waiting: list[tuple[int, int, tuple[str, ...], asyncio.Future[None]]] = []
        """(priority, arrival, owners, turn) of each run waiting for a worker: a few dozen at most."""
        self._running: collections.Counter[str] = collections.Counter()
        """Owner -> runs of theirs on a worker now."""
        self._arrivals = itertools.count()
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
        return "cuda" in self.pool.devices()

    @property
    def has_idle_worker(self) -> bool:
        return self._in_flight < self.workers

    def load(self) -> Load:
        return Load(self.workers, self.queue, self._in_flight)

    def retry_after_s(self) -> int:
        return retry_after_s(self._learners_in_flight, self.workers + self.queue, self.workers, self._mean_s)

    async def spare_worker(self) -> None:
        """Returns once a background run may start without a learner ever waiting for it: while
        another worker stays free (with one worker: when it is idle). With a backend that keeps
        turns, at once: it holds a background run back itself, seeing every process's runs."""
        if getattr(self.pool, "keeps_turns", False):
            return
        if self._changed is None:
            self._changed = asyncio.Event()
        while self._in_flight > max(0, self.workers - 2):
            self._changed.clear()
            await self._changed.wait()

    def _admit(self, lane: str, owners: tuple[str, ...]) -> None:
        if lane != "learner":
            return
        if self._learners_in_flight >= self.workers + self.queue:
            raise QueueFull(self.retry_after_s())
        for owner in owners:
            kind = owner.split(":", 1)[0]
            cap = self.caps.get(kind)
            if cap is not None and self._by_owner[owner] >= cap:
                raise QueueFull(max(1, math.ceil(self._mean_s)), kind, cap)

    async def _worker_slot(self, lane: str, owners: tuple[str, ...]) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((PRIORITY[lane], next(self._arrivals), owners, turn))
        await turn  # the slot is handed over by `_give_back_slot`

    def _share(self, owners: tuple[str, ...]) -> tuple[int, int]:
        """How many runs this run's address, then its learner, have on workers now."""
        by_kind = {owner.split(":", 1)[0]: self._running[owner] for owner in owners}
        return by_kind.get("address", 0), by_kind.get("learner", 0)

    def _give_back_slot(self) -> None:
        self._waiting = [entry for entry in self._waiting if not entry[3].done()]  # given up
        if not self._waiting:
            self._free += 1
            return
        chosen = min(self._waiting, key=lambda e: (e[0], *self._share(e[2]), e[1]))
        self._waiting.remove(chosen)
        chosen[3].set_result(None)

    async def run(
        self,
        code: str,
        *,
        explain: bool = False,
        device: str | None = None,
        subject: str = "This snippet",
        limits: Limits | None = None,
        lane: Lane = "learner",
        owners: tuple[str, ...] = (),
    ) -> RunResult:
        """Runs `code` in the sandbox; raises QueueFull when there is no room for it (see the
        class). `subject` names the code in the answer a CUDA-only snippet gets on a host without
        a GPU; `owners` ("learner:<id>", "address:<ip>") are whose share a learner's run uses.
        A background run (proving a key) should wait for `spare_worker()` first."""
        refused = self.pool.refusal(device, subject)
        if refused is not None:
            return refused  # at once: nothing online can run it, so no place in the queue either
        if getattr(self.pool, "keeps_turns", False):
            return await self._handed_on(code, explain, device, limits or self.limits, lane, owners)
        self._admit(lane, owners)
        self._in_flight += 1
        self._learners_in_flight += lane == "learner"
        self._by_owner.update(owners)
        chosen = limits or self.limits

        async def whole_run() -> RunResult:
            held = 0.0
            try:
                await self._worker_slot(lane, owners)
                self._running.update(owners)
                try:
                    started = time.perf_counter()
                    try:
                        result = await self.pool.run(code, chosen, explain=explain, device=device)
                    except RunsFull:  # the bound shared by every web process (remote workers)
                        raise QueueFull(self.retry_after_s()) from None
                    held = time.perf_counter() - started
                    return result
                finally:
                    self._running.subtract(owners)
                    self._running += collections.Counter()  # drop owners with nothing running
                    self._give_back_slot()
            finally:
                # Counted down when the sandbox is done, not when the client gives up: a run
                # abandoned by its client still holds its place.
                self._in_flight -= 1
                self._learners_in_flight -= lane == "learner"
                self._by_owner.subtract(owners)
                self._by_owner += collections.Counter()  # drop owners with nothing left
                if lane != "background" and held:
                    self._mean_s = 0.8 * self._mean_s + 0.2 * held if self._measured else held
                    self._measured = True
                if self._changed is not None:
                    self._changed.set()

        return await asyncio.shield(asyncio.ensure_future(whole_run()))

    async def _handed_on(
        self, code: str, explain: bool, device: str | None, limits: Limits, lane: str, owners: tuple[str, ...]
    ) -> RunResult:
        """A run handed at once to a backend that keeps the turns of every web process (see
        `Runs.keeps_turns`): its refusal is this queue's own (`QueueFull`, with its reason)."""
        self._in_flight += 1

        async def whole_run() -> RunResult:
            try:
                return await self.pool.run_in_turn(code, limits, explain=explain, device=device, lane=lane, owners=owners)  # type: ignore[attr-defined]
            except RunsFull as full:
                raise QueueFull(full.retry_after_s or self.retry_after_s(), full.reason, full.limit) from None
            finally:
                self._in_flight -= 1

        return await asyncio.shield(asyncio.ensure_future(whole_run()))
