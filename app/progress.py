"""A learner's standing: their attempts folded per question, review statuses, totals per topic and
set, history and review queue. Computed once from the bank, the store's rows and the clock; the
pages and the API both read it, so a learner sees the same numbers whichever they use.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app import review
from app.bank.load import Bank, LoadedQuestion, LoadedSet
from app.public_question import title_of
from app.store import Attempt, LearnerData, ReviewCard


@dataclass
class Standing:
    """One learner's attempts folded per question, with review statuses at `now`."""

    bank: Bank
    data: LearnerData
    now: datetime
    last: dict[str, Attempt] = field(init=False)

    def __post_init__(self) -> None:
        self.last = {}
        for a in self.data.attempts:
            if self.answered_this_version(a):
                self.last[a.question_id] = a

    def answered_this_version(self, attempt: Attempt) -> bool:
        """Whether an attempt answered the question as it is now (not a changed or replaced one)."""
        loaded = self.bank.question(attempt.question_id)
        return loaded is not None and attempt.fingerprint in ("", loaded.fingerprint)

    def card(self, question_id: str) -> ReviewCard | None:
        card = self.data.cards.get(question_id)
        loaded = self.bank.question(question_id)
        if card is None or loaded is None or card.fingerprint not in ("", loaded.fingerprint):
            return None
        return card

    def status(self, question_id: str) -> str:
        return review.status(self.last.get(question_id), self.card(question_id), self.now)

    def summary(self, questions: list[LoadedQuestion]) -> dict[str, int]:
        counts = {"total": len(questions), "new": 0, "right": 0, "wrong": 0, "due": 0}
        for q in questions:
            counts[self.status(q.id)] += 1
        counts["answered"] = counts["total"] - counts["new"]
        return counts

    def totals(self) -> dict[str, int]:
        """Attempts made and right, questions answered, questions in the bank, reviews due now."""
        attempts = self.data.attempts
        return {
            "attempts": len(attempts),
            "right": sum(1 for a in attempts if a.correct),
            "answered": len(self.last),
            "questions": len(self.bank.questions),
            "due": sum(1 for r in self.queue() if r["is_due"]),
        }

    def set_summary(self, loaded_set: LoadedSet) -> dict[str, int]:
        return self.summary(loaded_set.questions)

    def topic_questions(self) -> dict[str, list[LoadedQuestion]]:
        by_topic: dict[str, list[LoadedQuestion]] = defaultdict(list)
        for q in self.bank.questions:
            by_topic[q.question.topic].append(q)
        return dict(sorted(by_topic.items()))

    def topics(self) -> list[dict[str, Any]]:
        """Accuracy per topic: attempts right / attempts, and questions whose last try was right."""
        attempts: dict[str, list[Attempt]] = defaultdict(list)
        for a in self.data.attempts:
            attempts[a.topic].append(a)
        rows = []
        for topic, questions in self.topic_questions().items():
            tries = attempts.get(topic, [])
            right = sum(1 for a in tries if a.correct)
            rows.append(
                {
                    **self.summary(questions),  # "right" there counts questions whose last try was right
                    "topic": topic,
                    "attempts": len(tries),
                    "attempts_right": right,
                    "accuracy": round(100 * right / len(tries)) if tries else None,
                }
            )
        return rows

    def history(self, limit: int = 100) -> list[dict[str, Any]]:
        """Newest first; attempts at questions since removed from the bank are kept, untitled."""
        rows = []
        for a in reversed(self.data.attempts[-limit:]):
            loaded = self.bank.question(a.question_id)
            rows.append(
                {
                    "attempt_id": a.id,
                    "question_id": a.question_id,
                    "title": title_of(loaded) if loaded else a.question_id,
                    "exists": loaded is not None and self.answered_this_version(a),
                    "changed": loaded is not None and not self.answered_this_version(a),
                    "topic": a.topic,
                    "correct": a.correct,
                    "answer": a.answer_value,
                    "at": a.when,
                }
            )
        return rows

    def queue(self) -> list[dict[str, Any]]:
        rows = []
        cards = {qid: c for qid in self.data.cards if (c := self.card(qid)) is not None}
        for item in review.queue(cards, self.now):
            loaded = self.bank.question(item.question_id)
            if loaded is None:
                continue
            rows.append(
                {
                    "question_id": item.question_id,
                    "title": title_of(loaded),
                    "topic": loaded.question.topic,
                    "due": item.due,
                    "due_in": review.humanise_delta(item.due, self.now),
                    "is_due": item.is_due,
                    "lapses": item.lapses,
                }
            )
        return rows
