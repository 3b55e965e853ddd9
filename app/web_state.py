"""What one app instance holds: settings, store, runner, the bank (reloaded when its files change).

Kept on `app.state.web`, never at module level, so tests build several apps side by side.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates

from app import review
from app.bank import Bank, LoadedQuestion, load_bank, question_files
from app.runner import QueueFull, Runner
from app.settings import Settings
from app.store import Attempt, Store, utcnow
from app.verify_record import Record, load_records, records_dir, verifications
from app.web_errors import SANDBOX_DOWN, NotFound, NotReady, PayloadTooLarge, TooManyRuns
from app.web_views import Outcome, Standing
from sandbox import SandboxError

log = logging.getLogger("ampquiz.web")

LEARNER_COOKIE = "ampquiz_learner"


class BankSource:
    """The question bank, reloaded when a file under the bank folder changes (checked every few s).

    Authors edit YAML while the server runs; a file with problems is left out (and logged) while
    the valid ones keep serving.
    """

    def __init__(self, root: Path, *, check_every_s: float = 2.0) -> None:
        self.root = Path(root)
        self.check_every_s = check_every_s
        self._lock = threading.Lock()
        self._checked = 0.0
        self._signature: tuple = ()
        self.bank = Bank()
        self.records: list[Record] = []
        self.reload()

    def _files(self) -> list[Path]:
        files = question_files(self.root) if self.root.exists() else []
        folder = records_dir(self.root)
        return files + (sorted(folder.glob("*.json")) if folder.is_dir() else [])

    def _current_signature(self) -> tuple:
        sig = []
        for path in self._files():
            try:
                st = path.stat()
            except OSError:
                continue
            sig.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def reload(self) -> None:
        signature = self._current_signature()
        bank = load_bank(self.root)
        for problem in sorted(bank.problems):
            log.warning("question bank: left out: %s", problem)
        log.info("question bank: %d questions in %d sets", len(bank.questions), len(bank.sets))
        self.bank, self.records, self._signature = bank, load_records(self.root), signature
        self._checked = time.monotonic()

    def current(self) -> Bank:
        if time.monotonic() - self._checked >= self.check_every_s:
            with self._lock:
                if time.monotonic() - self._checked >= self.check_every_s:
                    self._checked = time.monotonic()
                    if self._current_signature() != self._signature:
                        self.reload()
        return self.bank


@dataclass
class WebState:
    settings: Settings
    store: Store
    runner: Runner
    bank_source: BankSource
    templates: Jinja2Templates
    clock: Callable[[], datetime] = field(default=utcnow)

    @property
    def bank(self) -> Bank:
        return self.bank_source.current()

    def code_too_long(self, code: str) -> PayloadTooLarge | None:
        """The 413 for a snippet over the size limit (the API raises it, the playground shows it)."""
        size, limit = len(code.encode()), self.settings.max_code_bytes
        if size <= limit:
            return None
        return PayloadTooLarge(f"That code is {size} bytes; the limit is {limit} bytes.")

    def question(self, question_id: str) -> LoadedQuestion:
        found = self.bank.question(question_id)
        if found is None:
            raise NotFound(f"There is no question {question_id!r}.")
        return found

    def verification_labels(self, loaded: LoadedQuestion) -> list[dict[str, str]]:
        return [
            {"device": v.device_kind, "result": v.result, "label": v.label}
            for v in verifications(self.bank_source.records, loaded)
        ]

    def question_device(self, loaded: LoadedQuestion) -> str | None:
        """The device a question's run asks for: CUDA-only code must never run on the CPU."""
        return "cuda" if loaded.question.requires == "cuda" else None

    def prefetch(self, loaded: LoadedQuestion) -> None:
        """Runs the question's code while the learner reads it, so the answer page is quick."""
        if loaded.question.code:
            self.runner.prefetch(loaded.question.code, self.question_device(loaded))

    async def question_run(
        self, loaded: LoadedQuestion
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The question's run (cached per code) as a dict, or why there is none right now."""
        code = loaded.question.code
        if not code:
            return None, None
        try:
            run = await self.runner.run_cached(code, self.question_device(loaded))
        except QueueFull as exc:
            return None, TooManyRuns(exc.retry_after_s).message
        except SandboxError as exc:
            log.error("sandbox failure running %s: %s", loaded.id, exc)
            return None, SANDBOX_DOWN
        return run.to_dict(), None

    def record(self, learner: str, loaded: LoadedQuestion, outcome: Outcome) -> Attempt:
        """Stores an attempt and moves the question's review card (see app.review)."""
        now = self.clock()
        update = review.after_attempt(self.store.card(learner, loaded.id), outcome.correct, now)
        q = loaded.question
        return self.store.record_attempt(
            learner,
            question_id=q.id,
            set_id=loaded.set_id,
            topic=q.topic,
            kind=q.kind,
            answer=outcome.answer,
            correct=outcome.correct,
            review=update,
            now=now,
        )

    def status(self, learner: str, question_id: str) -> str:
        """One question's status for one learner, without reading their whole history."""
        last_correct, due = self.store.question_state(learner, question_id)
        return review.status_of(last_correct, due, self.clock())

    def standing(self, learner: str) -> Standing:
        return Standing(self.bank, self.store.learner_data(learner), self.clock())


async def web_state(request: Request) -> WebState:
    """A dependency (async, so FastAPI does not hand it to a thread)."""
    state = getattr(request.app.state, "web", None)
    if state is None:
        raise NotReady()
    return state


async def learner_id(request: Request) -> str:
    """The anonymous learner's id, set by the cookie middleware on every request."""
    return request.scope["state"]["learner_id"]
