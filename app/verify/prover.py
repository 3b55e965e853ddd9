"""Proving on load: runs, in the background, each key this server could prove and nothing has
proved yet (`app.verify.proofs` decides which, and keeps what the runs show)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from app.bank.load import LoadedQuestion
from app.runs.queue import RunQueue
from app.verify.check import again_limits, check, worth_running_again
from app.verify.proofs import ProofBook
from sandbox import Limits, SandboxError
from sandbox.result import TRANSIENT

log = logging.getLogger("ampquiz.proofs")

PROVE_LIMITS = Limits(wall_s=60, cpu_s=60)
"""As `ampquiz verify` runs keys: generous, so a slow host never mistakes slowness for a wrong key."""
FIRST_TRY_LIMITS = Limits(wall_s=15, cpu_s=15)
"""A key's first proof: a run that ends early is tried again at `PROVE_LIMITS`, after the keys
not tried yet, so one snippet that never ends keeps the rest waiting 15 s, not minutes (it held a
question added after it pending for 138 s, an instructor's walk)."""


class Prover:
    """Runs, in the background, each question this server could prove but has not: on start and
    after every reload of the bank. It takes a sandbox worker only while another one stays free
    for learners (`RunQueue.spare_worker`), so a learner never waits behind it."""

    def __init__(
        self, book: ProofBook, queue: RunQueue, current: Any, *, idle_s: float = 0.5
    ) -> None:
        self.book = book
        self.queue = queue
        self.current = current
        """A callable giving (bank, records) as the server serves them now."""
        self.idle_s = idle_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._forever())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # Closing, whatever it was doing.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _forever(self) -> None:
        seen: tuple[int, int, int] | None = None
        while True:
            todo: list[LoadedQuestion] = []
            try:
                bank, records = self.current()
                self.book.follow(self.queue.environment)  # remote workers may have come online
                # Looking for work means a proof per question: do it only when something changed
                # (a new bank, new records, or a proof made here), never on every tick.
                now = (id(bank), id(records), self.book.version)
                if now != seen:
                    # A proof per question (kept per bank version, so mostly looked up): in a
                    # thread, so a large bank never holds the event loop.
                    todo = await asyncio.to_thread(self.book.to_prove, bank, records)
                    seen = now if not todo else None
                # Keys never tried first: one whose run ended early is tried again after them.
                todo.sort(key=self.book.tries_ended_early)
                for loaded in todo:
                    if await self.prove(loaded) == "ended early":
                        break  # the keys not tried yet (a file added since too) go first
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not stop every later proof: log it, go on
                log.exception("proving the bank failed; trying again shortly")
                seen = None
                await asyncio.sleep(2)
            await asyncio.sleep(self.idle_s if not todo else 0)

    async def prove(self, loaded: LoadedQuestion) -> str:
        """Proves (or holds back) one key: "done", "ended early" (its run ended for a reason of
        the moment: tried again later) or "not run" (nothing could run it now)."""
        assert loaded.question.code is not None
        await self.queue.spare_worker()
        device = "cuda" if loaded.question.requires == "cuda" else None
        limits = FIRST_TRY_LIMITS if not self.book.tries_ended_early(loaded) else PROVE_LIMITS
        try:
            run = await self.queue.run(
                loaded.question.code, device=device, limits=limits, lane="background"
            )
            # Twice (unless the first says nothing), the second on two threads: code that prints
            # something else each time, or on another machine's cores, proves nothing (see `check`).
            again = (await self.queue.run(loaded.question.code, device=device, limits=again_limits(limits), lane="background")
                     if worth_running_again(run) else run)  # fmt: skip
        except SandboxError as exc:
            log.warning("could not prove %s now (the sandbox is down): %s", loaded.id, exc)
            await asyncio.sleep(2)
            return "not run"
        if "unavailable" in (run.status, again.status):
            await asyncio.sleep(2)  # nothing online can run it now (no remote worker yet)
            return "not run"
        if run.status in TRANSIENT or again.status in TRANSIENT:
            self.book.transient_failure(loaded, run.message or again.message or run.status)
            return "ended early"
        checked = check(loaded, run, self.book.device, again)
        self.book.remember(loaded, checked)
        if checked.result == "fail":
            log.warning(
                "held back %s (%s): its run contradicts the key: %s",
                loaded.id,
                loaded.path,
                checked.reason,
            )
        return "done"
