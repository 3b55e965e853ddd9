"""What one app instance holds (`app.state.web`): settings, store, run queue, question runs, the
live bank, templates and the clock, with the few operations the pages and the API share.

Kept on the app, never at module level, so tests build several apps side by side.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates

from app import review
from app.bank.load import Bank, LoadedQuestion
from app.bank.workspace import Workspace
from app.progress import Standing
from app.runs.queue import RunQueue
from app.settings import Settings
from app.store import AttemptRow, Store, utcnow
from app.use_cases.answer import Answers, Kept
from app.verify.live_bank import LiveBank
from app.verify.proofs import Proof, ProofBook
from app.verify.question_runs import QuestionRuns
from app.web.answer_rate import AnswerRate, TooManyAnswers, address_key
from app.web.errors import RUN_REFUSED, AppError, NotFound, NotGraded, PayloadTooLarge, run_refusal
from app.web.page_threads import PageThreads
from app.web.rendering.fragments import SharedFragments


def client_address(request: Request) -> str:
    """Whose share a request counts against besides its cookie's (`connections.address_key`)."""
    return address_key(request.client.host) if request.client else "unknown"


@dataclass
class WebState:
    settings: Settings
    store: Store
    run_queue: RunQueue
    question_runs: QuestionRuns
    live_bank: LiveBank
    proofs: ProofBook
    templates: Jinja2Templates
    clock: Callable[[], datetime] = field(default=utcnow)
    page_threads: PageThreads = field(default_factory=lambda: PageThreads(1))
    """Where pages' blocking work (database calls, rendering) runs (`render.in_thread`): as many
    threads as the store gains from (`Store.useful_threads`), set by the app's lifespan."""
    fragments: SharedFragments = field(default_factory=SharedFragments)
    """Parts of pages shared by every learner, rendered once (a question's run, its cards)."""
    answer_rate: AnswerRate = field(default_factory=lambda: AnswerRate(0, 0))
    """How fast answers are taken (`app.web.answer_rate`), set by the app's lifespan."""
    _run_dicts: dict[int, tuple[Any, dict[str, Any]]] = field(default_factory=dict, repr=False)

    @property
    def bank(self) -> Bank:
        return self.live_bank.current()

    @functools.cached_property
    def workspace(self) -> Workspace:
        """The bank's folder as the studio writes it (`app.bank.workspace`)."""
        return Workspace(self.settings.bank)

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

    def proof(self, loaded: LoadedQuestion) -> Proof:
        """What proved this question's key here (see app.verify.proofs); only a proved key is graded."""
        return self.proofs.proof(loaded, self.live_bank.records)

    def verification_labels(self, loaded: LoadedQuestion) -> list[dict[str, str]]:
        return self.proof(loaded).badges

    def proof_summary(self) -> dict[str, Any]:
        return self.proofs.summary(self.bank, self.live_bank.records)

    def ensure_gradeable(self, loaded: LoadedQuestion) -> None:
        """Raises NotGraded for a key not proved here (being checked, or under review)."""
        proof = self.proof(loaded)
        if not proof.gradeable:
            raise NotGraded(proof.state)

    async def ensure_gradeable_by_its_run(self, loaded: LoadedQuestion) -> None:
        """`ensure_gradeable`, once the run learners are shown of the question's code has been
        checked against the key (`ProofBook.witness`): a committed record (even a hand-written
        one) or a lucky proof made the first answer after every start count on a key that run
        contradicts. The run is shared and kept (across processes and restarts), so this waits
        only where the result page would wait for it anyway; where none can be made now (a full
        queue), the key is graded on what proved it so far."""
        q = loaded.question
        if q.code and self.proofs.runnable_here(loaded) and self.proof(loaded).gradeable:
            await self.question_run(loaded)
        self.ensure_gradeable(loaded)

    @staticmethod
    def owners(request: Request) -> tuple[str, ...]:
        """Whose share of the run queue a learner's own run uses: their cookie and their address."""
        learner = request.scope.get("state", {}).get("learner_id", "")
        return (f"learner:{learner}", f"address:{client_address(request)}")

    @functools.cached_property
    def answers(self) -> Answers:
        """Taking answers (`app.use_cases.answer`), on this state's store, clock and secret."""
        return Answers(self.store, lambda: self.clock(), lambda: self.secret)

    async def answer(
        self, request: Request, learner: str, loaded: LoadedQuestion, positions: list[int] | None,
        output: str | None, submit_id: str | None = None, shown_at: float | None = None, *, prefetch_run: bool = False,
    ) -> Kept:  # fmt: skip
        """A learner's answer, taken (`Answers.keep`, in the page threads) once its key is proved
        (`ensure_gradeable_by_its_run`: NotGraded, 409) and it is graded (AnswerError, refused
        before it counts). It counts against its learner's and its address's answers per minute
        (`app.web.answer_rate`, on the event loop: it holds no lock); past either, TooManyAnswers
        (429) and nothing stored. Only a new answer counts: a form or an API call sent again,
        whose first sending was stored, gets that answer back, past the rate too; an answer the
        database failed to take costs nothing. `prefetch_run`: start the question's run for the
        result page meanwhile."""
        await self.ensure_gradeable_by_its_run(loaded)
        graded = self.answers.grade(learner, loaded, positions, output)
        if prefetch_run:
            self.question_runs.prefetch(loaded)
        address = client_address(request)
        over_rate: TooManyAnswers | None = None
        try:
            self.answer_rate.take(learner, address)
        except TooManyAnswers as exc:
            over_rate = exc
        try:
            kept = await self.page_threads.run(
                lambda: self.answers.keep(learner, loaded, graded, submit_id, shown_at, over_rate)
            )
        except Exception:
            if over_rate is None:
                self.answer_rate.give_back(learner, address)
            raise
        if over_rate is None and not kept.is_new:
            self.answer_rate.give_back(learner, address)
        return kept

    @functools.cached_property
    def secret(self) -> str:
        """The server's secret (the learner cookie's key), read once."""
        return self.settings.resolved_secret_key()

    async def learner_run(
        self, request: Request, code: str, explain: bool = True, device: str | None = None
    ) -> tuple[dict[str, Any] | None, AppError | None]:
        """A learner's own code (the playground, an interview), run in their share of the queue
        on `device` (None: wherever); a refusal (too long, no room, sandbox down) is returned to
        show on the page."""
        too_long = self.code_too_long(code)
        if too_long is not None:
            return None, too_long
        try:
            result = await self.run_queue.run(
                code, explain=explain, device=device, owners=self.owners(request)
            )
        except RUN_REFUSED as exc:
            return None, run_refusal(exc)
        return result.to_dict(), None

    async def question_run(
        self, loaded: LoadedQuestion
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The question's run (shared by every learner) as a dict, or why there is none right now."""
        if not loaded.question.code:
            return None, None
        try:
            run = await self.question_runs.run(loaded)
        except RUN_REFUSED as exc:
            return None, run_refusal(exc, doing=f"running {loaded.id}").message
        found = self._run_dicts.get(id(run))
        if found is None or found[0] is not run:  # the shared run as a dict, made once per run
            found = self._run_dicts[id(run)] = (run, run.to_dict())
            if len(self._run_dicts) > 2048:  # runs dropped from the cache: forget the oldest
                del self._run_dicts[next(iter(self._run_dicts))]
        return found[1], None

    def question_state(
        self, learner: str, loaded: LoadedQuestion, attempt_id: int | None = None
    ) -> tuple[str, AttemptRow | None]:
        """One question's status for one learner, without reading their whole history, and the
        attempt asked for when it is theirs (the result page). Blocks on the database."""
        found = self.store.question_state(learner, loaded.id, loaded.fingerprint, attempt_id)
        return review.status_of(found.last_correct, found.due, self.clock()), found.attempt

    def status(self, learner: str, loaded: LoadedQuestion) -> str:
        return self.question_state(learner, loaded)[0]

    def standing(self, learner: str, recent: int = 100) -> Standing:
        """The learner's standing (see app.progress); blocks on the database."""
        return Standing(self.bank, self.store.learner_data(learner, recent), self.clock())
