"""Answering a question: the one way an answer is taken, by the API, the answer form and an
interview's prediction.

An answer is graded in its asker's own choice order (`grading.picked_at`: positions as they saw
them). A learner's answer is then either practice (they saw its key, and it has not come back for
review yet: graded, not stored) or recorded, with its submit id and the question's review card
moved (`app.review`) in one transaction; a submit sent again (a double click, a replayed form, an
API retry) gets its first answer back. An interview's prediction becomes the `predicted` event of
its log.

Synchronous and blocking (the store): the web calls `Answers.keep` in its page threads, once per
answer, and counts the answers per minute itself, on its event loop, before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from app import review
from app.bank.load import LoadedQuestion
from app.bank.public import choice_order, picked_at
from app.bank.schema import MultipleChoiceQuestion
from app.grading import AnswerError, GradedAnswer, grade, regrade
from app.interview import entries, model
from app.store import Attempt, AttemptRow, ReviewCard, Store
from app.verify.proofs import Proof

SUBMIT_ID_MOST = 64
"""A submit id's length at most (a form's is 22 characters: `secrets.token_urlsafe(16)`)."""
SUBMIT_ID_PATTERN = r"^[^\x00-\x1f\x7f]*$"
"""No control character in a submit id (PostgreSQL refuses a text with NUL in it)."""
_SUBMIT_ID = re.compile(SUBMIT_ID_PATTERN)
ELAPSED_MOST_S = 3600.0
"""How long an answer is taken to have taken at most (a tab left open overnight says nothing)."""


def submit_id_problem(submit_id: str | None) -> str | None:
    """Why `submit_id` cannot be one, in the words of a 422 (those FastAPI says of a too long or
    mismatched string); None when it can (or is absent). The one rule for the API and the form."""
    if submit_id is None:
        return None
    if len(submit_id) > SUBMIT_ID_MOST:
        return f"String should have at most {SUBMIT_ID_MOST} characters"
    if not _SUBMIT_ID.match(submit_id):
        return f"String should match pattern '{SUBMIT_ID_PATTERN}'"
    return None


@dataclass(frozen=True)
class Kept:
    """What became of a learner's answer."""

    graded: GradedAnswer
    """As it counts: a submit sent again is graded as its stored first sending."""
    saved: AttemptRow | None
    """The stored attempt; None for practice."""
    is_new: bool
    """False when the submit was stored already (and nothing changed)."""
    counts_again_at: datetime | None = None
    """For practice: when an answer to the question counts again (it is due for review)."""


class Answers:
    """Taking answers: `grade`, then `keep` (a learner's) or `prediction` (a candidate's)."""

    def __init__(
        self, store: Store, clock: Callable[[], datetime], secret: Callable[[], str]
    ) -> None:
        self.store = store
        self.clock = clock
        self._secret = secret
        """The server's secret, read when first needed (the learner cookie's key)."""

    def order(self, asker: str, loaded: LoadedQuestion) -> list[int] | None:
        """The order `asker` (a learner's id, or an interview's `interview:TOKEN`) sees a
        multiple-choice question's choices in; None for other kinds."""
        q = loaded.question
        return (
            choice_order(q, asker, self._secret())
            if isinstance(q, MultipleChoiceQuestion)
            else None
        )

    def grade(
        self, asker: str, loaded: LoadedQuestion, positions: list[int] | None, output: str | None
    ) -> GradedAnswer:
        """An answer as a form or the API sends it: choices by their positions in `asker`'s
        order (`grading.picked_at`), graded by the choices themselves. Raises AnswerError."""
        order = self.order(asker, loaded)
        return grade(loaded, picked=picked_at(positions, order), output=output, order=order)

    def practice_until(
        self, learner: str, loaded: LoadedQuestion, submit_id: str | None = None
    ) -> datetime | None:
        """While `learner`'s last answer to this version of the question was wrong and it has not
        come back for review yet, they have seen its key (a wrong answer shows it): an answer
        then is practice, graded and not recorded, and this says when one counts again. None when
        it counts now. (Recorded, "try it again" with the key just shown marked the question right
        and cleared it from "to revisit".) Blocks on the database."""
        found = self.store.question_state(learner, loaded.id, loaded.fingerprint)
        if found.last_correct is False and found.due is not None and found.due > self.clock():
            # A form sent again (a double click) goes where its first sending went, though that
            # first answer, stored, is the wrong one that made this one practice.
            if submit_id is not None and self.store.submitted(learner, submit_id) is not None:
                return None
            return found.due
        return None

    def record(self, learner: str, loaded: LoadedQuestion, graded: GradedAnswer,
               submit_id: str | None = None, elapsed_s: float | None = None) -> tuple[AttemptRow, bool]:  # fmt: skip
        """Stores an attempt and moves the question's review card (see app.review), in one
        transaction; a submit already stored (a double click, a replayed form) returns that
        attempt, unchanged. Blocks on the database."""
        now = self.clock()
        q = loaded.question
        return self.store.record_attempt(
            learner, question_id=q.id, set_id=loaded.set_id, topic=q.topic, kind=q.kind,
            answer=graded.answer, correct=graded.correct, fingerprint=loaded.fingerprint,
            submit_id=submit_id, seconds=elapsed_s, now=now,
            # The stored card's row has the columns of the `ReviewCard` the scheduler reads.
            reschedule=lambda card: review.after_attempt(cast("ReviewCard | None", card), graded.correct, now, elapsed_s),
        )  # fmt: skip

    def keep(self, learner: str, loaded: LoadedQuestion, graded: GradedAnswer, submit_id: str | None = None,
             shown_at: float | None = None, over_rate: Exception | None = None) -> Kept:  # fmt: skip
        """A learner's graded answer, kept as it counts: practice (`practice_until`), or recorded.
        `shown_at`: when the question was shown (a timestamp the form carries), for how long the
        answer took. `over_rate`: the refusal when the answer is past the answers per minute
        (counted by the caller); raised, and nothing stored, unless the answer is a submit already
        stored, which is answered as the first time. Blocks on the database."""
        elapsed_s = (
            None
            if shown_at is None
            else min(ELAPSED_MOST_S, max(0.0, self.clock().timestamp() - shown_at))
        )
        until = self.practice_until(learner, loaded, submit_id)
        if until is not None:  # they saw its key: graded, not stored
            if over_rate is not None:
                raise over_rate
            return Kept(graded, None, True, until)
        if over_rate is not None and (
            submit_id is None or self.store.submitted(learner, submit_id) is None
        ):
            raise over_rate
        saved, is_new = self.record(learner, loaded, graded, submit_id, elapsed_s)
        if not is_new:  # the same submit again: answered as the first time
            # An attempt's row has the columns of the `Attempt` that `regrade` reads.
            graded = regrade(loaded, cast("Attempt", saved), self.order(learner, loaded)) or graded
        return Kept(graded, saved, is_new)

    def prediction(self, asker: str, loaded: LoadedQuestion, proof: Proof, positions: list[int] | None,
                   output: str | None, confidence: int) -> dict[str, Any]:  # fmt: skip
        """A candidate's prediction, graded, as the `predicted` event of the interview's log
        (`app.interview.entries.predicted`); `proof`: what proved the key (an interview's,
        `app.verify.key_checks.interview_proof`). Raises AnswerError, a sentence for the page."""
        if confidence not in model.CONFIDENCES:
            raise AnswerError("Say how sure you are: 50, 75 or 95 %.")
        graded = self.grade(asker, loaded, positions, output)
        authors_word = proof.on_the_authors_word(loaded.question.asks_about)
        return entries.predicted(loaded, graded, confidence, authors_word=authors_word)
