"""The runs of questions' code, shared by every learner: a question's code is fixed, so one run
(with its explanation) serves everyone who answers it, and it is started while the learner is
still reading the question, when a worker is idle anyway.

With a `shelf` (the store), a run is also kept in the database: the server's other web processes,
and the server after a restart, take it from there instead of running the same code again."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from app.bank.load import LoadedQuestion
from app.runs.queue import RunQueue
from sandbox import RunResult
from sandbox.result import TRANSIENT

log = logging.getLogger("ampquiz.question_runs")


Key = tuple[str, str | None]


class Shelf(Protocol):
    """Where runs are kept for every process (`app.store.repository.Store`); both calls block."""

    def stored_run(self, key: str) -> str | None: ...

    def keep_run(self, key: str, result_json: str) -> None: ...


def device_of(loaded: LoadedQuestion) -> str | None:
    """The device a question's run asks for: CUDA-only code must never run on the CPU."""
    return "cuda" if loaded.question.requires == "cuda" else None


ENDED_EARLY_KEPT_S = 30.0
"""How long a run that ended early (`TRANSIENT`: a timeout, say) is handed out again before the
code is run anew: an answer waits for the question's run before it is graded, and its result page
shows that run; without it, code slower than the learners' wall time made each answer wait for
two runs to time out, one after the other."""


class QuestionRuns:
    """Each question's run, run once through the queue and then kept in memory (unless it ended
    in a way that may not happen next time: `sandbox.result.TRANSIENT`, kept `ENDED_EARLY_KEPT_S`)."""

    def __init__(self, queue: RunQueue, shelf: Shelf | None = None,
                 witness: Callable[[LoadedQuestion, RunResult], None] | None = None) -> None:  # fmt: skip
        self.queue = queue
        self.shelf = shelf
        self.witness = witness
        """Told of every question's run as it is handed out (`ProofBook.witness`: a run that
        contradicts the key holds it back), the first while the learner still reads the question."""
        self._cache: dict[Key, RunResult] = {}
        self._ended_early: dict[Key, tuple[float, RunResult]] = {}
        self._pending: dict[Key, asyncio.Future[RunResult]] = {}
        self._background: set[asyncio.Task[Any]] = set()

    def close(self) -> None:
        for task in list(self._background):
            task.cancel()

    async def run(self, loaded: LoadedQuestion) -> RunResult:
        """The question's run with explanations; raises what `RunQueue.run` raises."""
        key = (loaded.question.code or "", device_of(loaded))
        run = self._cache.get(key) or self._recently_ended_early(key) or await self._made(key)
        if self.witness is not None:
            self.witness(loaded, run)
        return run

    def _recently_ended_early(self, key: Key) -> RunResult | None:
        kept = self._ended_early.get(key)
        if kept is None or time.monotonic() - kept[0] > ENDED_EARLY_KEPT_S:
            self._ended_early.pop(key, None)
            return None
        return kept[1]

    async def _made(self, key: Key) -> RunResult:
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._shelved_or_run(key))
            self._pending[key] = pending

            def keep(fut: asyncio.Future[RunResult]) -> None:
                self._pending.pop(key, None)
                if not fut.cancelled() and fut.exception() is None:
                    if fut.result().status not in TRANSIENT:
                        self._cache[key] = fut.result()
                    else:
                        if len(self._ended_early) >= 1024:
                            self._ended_early.clear()
                        self._ended_early[key] = (time.monotonic(), fut.result())

            pending.add_done_callback(keep)
        return await asyncio.shield(pending)

    def _shelf_key(self, key: Key) -> str:
        env = self.queue.environment
        what = [
            key[0],
            key[1],
            env.get("device_kind"),
            env.get("torch_version"),
            env.get("device_name"),
        ]
        return hashlib.sha256(json.dumps(what).encode()).hexdigest()

    async def _shelved_or_run(self, key: Key) -> RunResult:
        shelf_key = self._shelf_key(key) if self.shelf is not None else ""
        if self.shelf is not None:
            try:
                kept = await asyncio.to_thread(self.shelf.stored_run, shelf_key)
                if kept is not None:
                    return RunResult.from_dict(json.loads(kept))
            except Exception:  # a database hiccup costs a run, never the page
                log.exception("reading a kept question run failed; running it")
        result = await self.queue.run(
            key[0], explain=True, device=key[1], subject="This question's code", lane="question"
        )
        if self.shelf is not None and result.status not in TRANSIENT:
            try:
                await asyncio.to_thread(self.shelf.keep_run, shelf_key, result.to_json())
            except Exception:
                log.exception("keeping a question run failed")
        return result

    def prefetch(self, loaded: LoadedQuestion) -> None:
        """Starts a question's run while the learner reads it, when a worker is idle anyway."""
        if not loaded.question.code:
            return
        key = (loaded.question.code, device_of(loaded))
        if key in self._cache or key in self._pending or not self.queue.has_idle_worker:
            return
        task = asyncio.ensure_future(self.run(loaded))
        self._background.add(task)

        def forget(t: asyncio.Task[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.debug("prefetch failed: %s", t.exception())

        task.add_done_callback(forget)
