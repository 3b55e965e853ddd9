"""What the store hands back and takes: rows as plain frozen values (no ORM object's bookkeeping;
a progress page reads dozens), a learner's summary, one question's state, a card's update.
`app.store.repository` reads and writes them; pages, the API and the review scheduler use them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from app.store.tables import AttemptValues, as_utc


class _AttemptColumns(NamedTuple):
    id: int
    learner_id: str
    question_id: str
    set_id: str
    topic: str
    kind: str
    answer: str
    correct: bool
    created_at: datetime
    fingerprint: str
    submit_id: str | None
    seconds: float | None


class AttemptRow(AttemptValues, _AttemptColumns):
    """An attempt as read back for a page: the `Attempt` table's columns, without an ORM
    object's bookkeeping. A named tuple (a progress page reads dozens): a frozen dataclass's
    `__init__` sets each field through `object.__setattr__`, 2.5 us a row against 0.5."""

    __slots__ = ()


class CardRow(NamedTuple):
    """A review card as read back for a page (`ReviewCard`'s columns; `card`, the scheduler's
    JSON, only where it is needed). A named tuple: a progress page makes one per question the
    learner answered, 0.7 us each where a frozen dataclass took 2.4."""

    learner_id: str
    question_id: str
    due: datetime
    lapses: int
    fingerprint: str
    card: str = ""

    @property
    def due_utc(self) -> datetime:
        return as_utc(self.due)


class QuestionState(NamedTuple):
    last_correct: bool | None
    """Whether the learner's last attempt at this version was right (None: never answered)."""
    due: datetime | None
    """When its review card is due (None: no card)."""
    attempt: AttemptRow | None = None
    """The attempt asked for, when it is this learner's."""


@dataclass(frozen=True)
class LearnerData:
    """Everything one learner's pages need, read in one go and summarised by the database, so it
    grows with the questions the learner answered, not with every attempt they made."""

    latest: list[tuple[str, str, bool]] = field(default_factory=list)
    """(question id, fingerprint, right) of the last attempt at each version of each question
    answered, oldest first."""
    by_topic: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Topic -> (attempts, right attempts)."""
    cards: dict[str, CardRow] = field(default_factory=dict)
    """Review cards by question id (without the scheduler's JSON, which no page shows)."""
    recent: list[AttemptRow] = field(default_factory=list)
    """The newest attempts, newest first."""

    @property
    def attempts(self) -> int:
        """How many attempts the learner made (their topic counts added up)."""
        return attempts_in(self.by_topic)


def attempts_in(by_topic: dict[str, tuple[int, int]]) -> int:
    """Attempts made, from topic counts (attempts, right attempts)."""
    return sum(n for n, _ in by_topic.values())


@dataclass(frozen=True)
class ReviewUpdate:
    """A review card's new state, computed by app.review and stored with the attempt."""

    card_json: str
    due: datetime


def card_write(card: CardRow | None, review: ReviewUpdate | None,
                reschedule: Callable[[CardRow | None], ReviewUpdate | None] | None,
                values: dict[str, Any]) -> dict[str, Any] | None:  # fmt: skip
    """The review card's row to write with an answer (`sql.CARD_COLUMNS`; None: the card stays
    as it is): `review`, or what `reschedule` makes of the card stored (None, or another
    version's card: afresh)."""
    fingerprint, correct = values["fingerprint"], values["correct"]
    same = card is not None and (not card.fingerprint or card.fingerprint == fingerprint)
    if reschedule is not None:
        review = reschedule(card if same else None)
    if review is None:
        return None
    lapses = (card.lapses if card is not None and same else 0) + (0 if correct else 1)
    return {"learner_id": values["learner_id"], "question_id": values["question_id"], "card": review.card_json,
            "due": review.due, "lapses": lapses, "fingerprint": fingerprint}  # fmt: skip
