"""Review scheduling (FSRS) with an injected clock: pure functions, no server (milliseconds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app import review
from app.store import ReviewCard

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def card_after(correct: bool, now: datetime, card: ReviewCard | None = None) -> ReviewCard | None:
    update = review.after_attempt(card, correct, now)
    if update is None:
        return card
    lapses = (card.lapses if card else 0) + (0 if correct else 1)
    return ReviewCard(
        learner_id="l", question_id="q", card=update.card_json, due=update.due, lapses=lapses
    )


def test_a_question_never_missed_never_enters_review() -> None:
    assert review.after_attempt(None, True, NOW) is None


def test_a_miss_comes_back_after_the_learning_step() -> None:
    card = card_after(False, NOW)
    assert card is not None and card.due_utc == NOW + timedelta(minutes=10)
    assert review.status_of(False, card.due_utc, NOW) == "wrong"
    assert review.status_of(False, card.due_utc, NOW + timedelta(minutes=10)) == "due"


def test_right_before_it_is_due_is_practice_and_changes_nothing() -> None:
    card = card_after(False, NOW)
    assert review.after_attempt(card, True, NOW + timedelta(minutes=1)) is None


def test_right_when_due_pushes_the_next_review_further_out() -> None:
    card = card_after(False, NOW)
    assert card is not None
    later = NOW + timedelta(minutes=10)
    again = card_after(True, later, card)
    assert again is not None and again.due_utc > later + timedelta(hours=1)


def test_the_queue_puts_what_is_due_first() -> None:
    soon = ReviewCard(
        learner_id="l", question_id="a", card="", due=NOW - timedelta(minutes=1), lapses=1
    )
    later = ReviewCard(
        learner_id="l", question_id="b", card="", due=NOW + timedelta(days=2), lapses=2
    )
    items = review.queue({"b": later, "a": soon}, NOW)
    assert [(i.question_id, i.is_due) for i in items] == [("a", True), ("b", False)]


def test_when_is_said_in_words() -> None:
    assert (
        review.humanise_delta(NOW + timedelta(seconds=30), NOW) == "in under a minute"
    )  # not due yet: not "now"
    assert review.humanise_delta(NOW - timedelta(seconds=30), NOW) == "now"
    assert review.humanise_delta(NOW + timedelta(minutes=10), NOW) == "in 10 minutes"
    assert review.humanise_delta(NOW + timedelta(days=3, hours=1), NOW) == "in 3 days"
    assert review.humanise_delta(NOW - timedelta(hours=2), NOW) == "2 hours ago"
    assert review.humanise_delta(NOW + timedelta(minutes=1), NOW) == "in 1 minute"
