"""The web's bounded, fair queue in front of the sandbox: runs snippets without blocking the event loop.

Runs go to a `Runs` backend (app.runs: the local pool, a pool shared by this host's web
processes, or remote workers), at most `workers` at once. Up to `queue` more runs wait their turn;
beyond that `QueueFull` says when to come back (the web turns it into 429 + Retry-After), instead
of letting waiting requests pile up without bound. Who may run and who runs next is
`app.runs.turns`'s rule; this waits on it with the event loop. No FastAPI here.

(The sandbox's "runner" is the process that runs one snippet; this is the queue in front of them.)
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from app.runs import Runs, RunsFull
from app.runs.turns import Lane, QueueFull, Turns, retry_after_s
from sandbox import Limits, RunResult

__all__ = [
    "Load",
    "QueueFull",
    "RunQueue",
    "retry_after_s",
]  # QueueFull and retry_after_s: as the web and the tests know them


@dataclass(frozen=True)
class Load:
    workers: int
    queue: int
    in_flight: int
    """Runs running or waiting."""


class RunQueue:
    """Runs snippets without blocking the event loop, in the turns `app.runs.turns` gives: within
    the room and each learner's and address's share, and the next free worker to the waiting run
    of the highest priority, then of the owners with the fewest runs going."""

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
        self.limits = limits
        self.turns: Turns[asyncio.Future[None]] = Turns(
            workers=workers, queue=queue, per_learner=per_learner, per_address=per_address
        )
        self._runs_handed_on = 0
        """Runs handed to a backend that keeps the turns (`_handed_on`): this process's part of them,
        for `load()` and `has_idle_worker`; `turns` then admits nothing here."""
        self._changed: asyncio.Event | None = None

    @property
    def environment(self) -> dict[str, Any]:
        return self.pool.environment

    @property
    def has_cuda(self) -> bool:
        return "cuda" in self.pool.devices()

    @property
    def has_idle_worker(self) -> bool:
        return self.turns.in_flight + self._runs_handed_on < self.turns.workers

    def load(self) -> Load:
        return Load(
            self.turns.workers, self.turns.queue, self.turns.in_flight + self._runs_handed_on
        )

    def retry_after_s(self) -> int:
        return self.turns.retry_after_s()

    async def spare_worker(self) -> None:
        """Returns once a background run may start without a learner ever waiting for it: while
        another worker stays free (with one worker: when it is idle). With a backend that keeps
        turns, at once: it holds a background run back itself, seeing every process's runs."""
        if getattr(self.pool, "keeps_turns", False):
            return
        if self._changed is None:
            self._changed = asyncio.Event()
        while not self.turns.spare:
            self._changed.clear()
            await self._changed.wait()

    async def _worker_slot(self, lane: str, owners: tuple[str, ...]) -> None:
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self.turns.take_slot(lane, owners, turn):
            await turn  # the slot is handed over by `_give_back_slot`

    def _give_back_slot(self, owners: tuple[str, ...]) -> None:
        chosen = self.turns.give_back_slot(owners, lambda turn: turn.done())  # given up
        if chosen is not None:
            chosen.set_result(None)

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
        self.turns.admit(lane, owners)
        chosen = limits or self.limits

        async def whole_run() -> RunResult:
            held = 0.0
            try:
                await self._worker_slot(lane, owners)
                self.turns.started(owners)
                try:
                    started = time.perf_counter()
                    try:
                        result = await self.pool.run(code, chosen, explain=explain, device=device)
                    except RunsFull:  # the bound shared by every web process (remote workers)
                        raise QueueFull(self.retry_after_s()) from None
                    held = time.perf_counter() - started
                    return result
                finally:
                    self._give_back_slot(owners)
            finally:
                # Counted down when the sandbox is done, not when the client gives up: a run
                # abandoned by its client still holds its place.
                self.turns.finished(lane, owners, held)
                if self._changed is not None:
                    self._changed.set()

        return await asyncio.shield(asyncio.ensure_future(whole_run()))

    async def _handed_on(
        self,
        code: str,
        explain: bool,
        device: str | None,
        limits: Limits,
        lane: str,
        owners: tuple[str, ...],
    ) -> RunResult:
        """A run handed at once to a backend that keeps the turns of every web process (see
        `Runs.keeps_turns`): its refusal is this queue's own (`QueueFull`, with its reason)."""
        self._runs_handed_on += 1

        async def whole_run() -> RunResult:
            try:
                # Only a backend that keeps turns (`keeps_turns`, checked by the caller) has it.
                return await self.pool.run_in_turn(  # type: ignore[attr-defined]
                    code, limits, explain=explain, device=device, lane=lane, owners=owners
                )
            except RunsFull as full:
                raise QueueFull(
                    full.retry_after_s or self.retry_after_s(), full.reason, full.limit
                ) from None
            finally:
                self._runs_handed_on -= 1

        return await asyncio.shield(asyncio.ensure_future(whole_run()))
