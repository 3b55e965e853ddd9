"""Spaced repetition of missed questions, scheduled by FSRS (the maintained `fsrs` package).

A question enters the learner's review queue the first time they get it wrong. From then on a
wrong answer rates the card `Again`; a right answer rates it by how long the learner took
(`rating`): `Easy` within 20 s, `Hard` after 2 minutes, `Good` between (or when the time is not
known) — but only once the card is due: answering right a minute after being shown the answer is
short-term memory, not recall, so it does not push the next review out. Pure functions over
store rows; the clock is a parameter.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from operator import itemgetter
from typing import Literal, NamedTuple

from fsrs import Card, Rating, Scheduler

from app.store import Attempt, ReviewCard, ReviewUpdate, as_utc

Status = Literal["new", "right", "wrong", "due"]
STATUS_LABELS: dict[str, str] = {
    "new": "new",
    "right": "right",
    "wrong": "wrong",
    "due": "due for review",
}

_SCHEDULER = Scheduler(
    desired_retention=0.9,
    learning_steps=(timedelta(minutes=10),),
    relearning_steps=(timedelta(minutes=10),),
)


EASY_WITHIN_S = 20.0
HARD_AFTER_S = 120.0


def rating(correct: bool, elapsed_s: float | None) -> Rating:
    """How well the learner recalled it: wrong is Again; right is Easy when quick, Hard when slow."""
    if not correct:
        return Rating.Again
    if elapsed_s is None:
        return Rating.Good
    if elapsed_s <= EASY_WITHIN_S:
        return Rating.Easy
    return Rating.Hard if elapsed_s >= HARD_AFTER_S else Rating.Good


def after_attempt(
    card: ReviewCard | None, correct: bool, now: datetime, elapsed_s: float | None = None
) -> ReviewUpdate | None:
    """The card's next state after an attempt, or None when the schedule does not change.
    `elapsed_s`: how long the learner took to answer, when known."""
    if card is None and correct:
        return None  # never missed: nothing to review
    if card is not None and correct and as_utc(card.due) > now:
        return None  # right before it was due: practice, not a review
    # fsrs.Card() without an id sleeps 1 ms to make one unique: give it one (the due time's).
    current = (
        Card.from_json(card.card)
        if card is not None and card.card
        else Card(card_id=int(now.timestamp() * 1000), due=now)
    )
    updated, _log = _SCHEDULER.review_card(current, rating(correct, elapsed_s), now)
    return ReviewUpdate(card_json=updated.to_json(), due=updated.due)


def status(last: Attempt | None, card: ReviewCard | None, now: datetime) -> Status:
    """What a set page shows for a question: new, right, wrong, or due for review."""
    return status_of(last.correct if last else None, card.due_utc if card else None, now)


def status_of(last_correct: bool | None, due: datetime | None, now: datetime) -> Status:
    """The same from plain values: whether the last attempt was right, and when the card is due."""
    if last_correct is None:
        return "new"
    if due is not None and due <= now:
        return "due"
    return "right" if last_correct else "wrong"


class QueueItem(NamedTuple):
    """One missed question in the review queue (a named tuple: a queue has one per missed question)."""

    question_id: str
    due: datetime
    lapses: int
    is_due: bool


def queue(
    cards: dict[str, ReviewCard], now: datetime, due: dict[str, datetime] | None = None
) -> list[QueueItem]:
    """Every missed question, soonest due first (those due now lead). `due`: the cards' due
    times in UTC by question id, where the caller has them already."""
    items = []
    for c in cards.values():
        when = due[c.question_id] if due is not None else c.due_utc
        items.append(QueueItem(c.question_id, when, c.lapses, when <= now))
    items.sort(key=_SOONEST_FIRST)
    return items


_SOONEST_FIRST = itemgetter(1, 0)
"""A queue item's (due, question id): in C, where a lambda cost a Python call per card."""


def humanise_delta(moment: datetime, now: datetime) -> str:
    """'now', 'in under a minute', 'in 10 minutes', 'in 3 days', '2 hours ago': how the queue
    says when. A moment seconds ahead is not 'now': the review page said "Nothing is due for
    review right now. The next one comes back now." """
    seconds = (moment - now).total_seconds()
    future = seconds > 0
    seconds = abs(seconds)
    if seconds < 60:
        return "in under a minute" if future else "now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            text = f"{n} {unit}{'s' if n != 1 else ''}"
            return f"in {text}" if future else f"{text} ago"
    return "now"
