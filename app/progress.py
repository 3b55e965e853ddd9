"""A learner's standing: their last answer per question, review statuses, totals per topic and
set, history and review queue. Computed from the bank (its per-version index), the store's
summary of the learner (`LearnerData`) and the clock; the pages and the API both read it, so a
learner sees the same numbers whichever they use.

It costs what the learner answered, not what the bank holds: a question never answered is "new"
without being looked at, so counts per set and per topic are the bank's totals (kept per bank
version) less what the learner's answers moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from app import review
from app.bank.index import BankIndex, index_of
from app.bank.load import Bank, LoadedQuestion, LoadedSet
from app.bank.public import title_of
from app.store.rows import AttemptRow, CardRow, LearnerData
from app.store.tables import as_utc

STATUSES = ("new", "right", "wrong", "due")


# The rows the progress page shows are named tuples: a template reads `row.title` as an
# attribute (C-level for a named tuple), and one is made in 0.5 us where a frozen dataclass took
# 2.5 (its `__init__` sets each field through `object.__setattr__`); a page makes ~60. The API
# sends them as dicts (`as_dicts`).


class TopicRow(NamedTuple):
    topic: str
    total: int
    new: int
    right: int
    """Questions of the topic whose last try was right."""
    wrong: int
    due: int
    answered: int
    attempts: int
    attempts_right: int
    accuracy: int | None
    """Percent of attempts right (None: not tried yet)."""


class HistoryRow(NamedTuple):
    attempt_id: int
    question_id: str
    title: str
    exists: bool
    """The attempt answered the question as it is now."""
    changed: bool
    """The question is still there but has changed since."""
    topic: str
    correct: bool
    answer: Any
    at: datetime


class QueueRow(NamedTuple):
    question_id: str
    title: str
    topic: str
    due: datetime
    due_in: str
    is_due: bool
    lapses: int


def as_dicts(rows: list[Any]) -> list[dict[str, Any]]:
    """Rows of this module as the API's JSON objects."""
    return [row._asdict() for row in rows]


@dataclass
class Standing:
    """One learner's answers folded per question, with review statuses at `now`."""

    bank: Bank
    data: LearnerData
    now: datetime
    last: dict[str, bool] = field(init=False)
    """Question id -> whether the last answer to it, as it is now, was right."""
    index: BankIndex = field(init=False)

    def __post_init__(self) -> None:
        # One pass over what the learner answered, each question and its fingerprint looked up in
        # the bank's index once: a progress page of a learner who answered the whole bank (175
        # questions) spent 220 us here when each row looked the question up, then its fingerprint.
        # `_as_now`'s check is written out in both loops: a call per row cost 16 us more.
        self.index = index_of(self.bank)
        versions = self.index.versions
        self.last = last = {}
        self._answered: dict[str, LoadedQuestion] = {}
        """The questions in `last`, as the bank holds them now."""
        answered = self._answered
        for question_id, fingerprint, right in self.data.latest:  # oldest first: the last one wins
            found = versions.get(question_id)
            if found is not None and fingerprint in ("", found[1]):
                last[question_id] = right
                answered[question_id] = found[0]
        self._cards: dict[str, CardRow] = {}
        """The learner's cards for questions as they are now (another version's card is left out)."""
        self._due: dict[str, datetime] = {}
        """Those cards' due times, in UTC."""
        for question_id, card in self.data.cards.items():
            found = versions.get(question_id)
            if found is not None and card.fingerprint in ("", found[1]):
                self._cards[question_id] = card
                self._due[question_id] = as_utc(card.due)
        self._statuses: dict[str, str] | None = None
        self._items: list[review.QueueItem] | None = None
        self._groups: dict[str, dict[str, list[str]]] = {}

    def _as_now(self, question_id: str, fingerprint: str) -> LoadedQuestion | None:
        """The question, when `fingerprint` names it as the bank holds it now (or names no
        version: rows from before fingerprints were kept)."""
        found = self.index.versions.get(question_id)
        return found[0] if found is not None and fingerprint in ("", found[1]) else None

    def answered_this_version(self, attempt: AttemptRow) -> bool:
        """Whether an attempt answered the question as it is now (not a changed or replaced one)."""
        return self._as_now(attempt.question_id, attempt.fingerprint) is not None

    def card(self, question_id: str) -> CardRow | None:
        """The learner's card for the question as it is now (None for another version's)."""
        return self._cards.get(question_id)

    def status(self, question_id: str) -> str:
        if question_id not in self.last:
            return "new"
        return self.statuses()[question_id]

    def statuses(self) -> dict[str, str]:
        """The status of every question answered (every other one is new)."""
        if self._statuses is None:
            due, now, status_of = self._due, self.now, review.status_of
            self._statuses = {
                qid: status_of(right, due.get(qid), now) for qid, right in self.last.items()
            }
        return self._statuses

    def _counts(self, total: int, statuses: Any) -> dict[str, int]:
        counts = {"total": total, "new": 0, "right": 0, "wrong": 0, "due": 0}
        for status in statuses:  # a loop: a Counter per set or topic cost more than its counting
            counts[status] += 1
        counts["new"] = total - counts["right"] - counts["wrong"] - counts["due"]
        counts["answered"] = total - counts["new"]
        return counts

    def summary(self, questions: list[LoadedQuestion]) -> dict[str, int]:
        known = self.statuses()
        return self._counts(len(questions), (known[q.id] for q in questions if q.id in known))

    def set_summary(self, loaded_set: LoadedSet) -> dict[str, int]:
        return self._counts(len(loaded_set.questions), self._grouped("set").get(loaded_set.id, []))

    def _grouped(self, by: str) -> dict[str, list[str]]:
        """The answered questions' statuses per set id or per topic."""
        cached = self._groups.get(by)
        if cached is None:
            cached = self._groups[by] = {}
            answered, by_set = self._answered, by == "set"
            for qid, status in self.statuses().items():
                loaded = answered[qid]
                key = loaded.set_id if by_set else loaded.question.topic
                statuses = cached.get(key)
                if statuses is None:
                    cached[key] = [status]
                else:
                    statuses.append(status)
        return cached

    def totals(self) -> dict[str, int]:
        """Attempts made and right, questions answered, questions in the bank, reviews due now."""
        return {
            "attempts": self.data.attempts,
            "right": sum(r for _, r in self.data.by_topic.values()),
            "answered": len(self.last),
            "questions": self.index.count,
            "due": self.due_count(),
        }

    def topics(self) -> list[TopicRow]:
        """Accuracy per topic: attempts right / attempts, and questions whose last try was right."""
        by_topic = self._grouped("topic")
        rows = []
        for topic, total in self.index.topic_totals.items():
            tries, right = self.data.by_topic.get(topic, (0, 0))
            c = self._counts(total, by_topic.get(topic, []))
            rows.append(TopicRow(
                topic=topic, total=total, new=c["new"], right=c["right"], wrong=c["wrong"], due=c["due"],
                answered=c["answered"], attempts=tries, attempts_right=right,
                accuracy=round(100 * right / tries) if tries else None,
            ))  # fmt: skip
        return rows

    def history(self, limit: int = 100) -> list[HistoryRow]:
        """Newest first; attempts at questions since removed from the bank are kept, untitled."""
        rows = []
        for a in self.data.recent[:limit]:
            loaded = self.bank.question(a.question_id)
            this_version = loaded is not None and self.answered_this_version(a)
            rows.append(HistoryRow(
                attempt_id=a.id, question_id=a.question_id, title=title_of(loaded) if loaded else a.question_id,
                exists=this_version, changed=loaded is not None and not this_version, topic=a.topic,
                correct=a.correct, answer=a.answer_value, at=a.when,
            ))  # fmt: skip
        return rows

    def queue_items(self) -> list[review.QueueItem]:
        """Every missed question of the bank as it is now, soonest due first (due ones lead)."""
        if self._items is None:
            # A CardRow has the ReviewCard fields queue() reads; review types it by the model.
            self._items = review.queue(self._cards, self.now, self._due)  # type: ignore[arg-type]
        return self._items

    def due_count(self) -> int:
        return sum(1 for item in self.queue_items() if item.is_due)

    def queue(self, limit: int | None = None, *, due: bool | None = None) -> list[QueueRow]:
        """The review queue as rows to show, soonest due first: all of it, or the first `limit`
        (only those due now, or only those not due yet, with `due`)."""
        rows: list[QueueRow] = []
        for item in self.queue_items():
            if due is not None and item.is_due != due:
                continue
            if limit is not None and len(rows) >= limit:
                break
            loaded = self.bank.question(item.question_id)
            assert loaded is not None  # `card()` keeps only cards of this bank's questions
            rows.append(QueueRow(
                question_id=item.question_id, title=title_of(loaded), topic=loaded.question.topic, due=item.due,
                due_in=review.humanise_delta(item.due, self.now), is_due=item.is_due, lapses=item.lapses,
            ))  # fmt: skip
        return rows
