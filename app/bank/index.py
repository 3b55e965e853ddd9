"""What the pages look up in a bank, computed once per bank version instead of once per request:
each question's set and place in it, each set by id, and the questions per topic and per set.

A bank is never changed once loaded (a reload makes a new one), so the index is kept on the bank
object itself and goes with it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from app.bank.load import Bank, LoadedQuestion, LoadedSet


@dataclass(frozen=True)
class BankIndex:
    sets: dict[str, LoadedSet]
    place: dict[str, tuple[LoadedSet, int]]
    """Question id -> its set and its 0-based position there."""
    topic_totals: dict[str, int]
    """Questions per topic, topics sorted."""
    set_topics: dict[str, list[str]]
    """A set's topics, sorted."""
    count: int
    versions: dict[str, tuple[LoadedQuestion, str]]
    """Question id -> the question and its fingerprint: what a learner's rows are checked against
    (an answer to another version of a question counts for nothing now), in one lookup."""
    starter: LoadedSet | None = None
    """Where a newcomer starts: the set with the most warm-up (difficulty 1) questions, the first
    such in the bank's order (the first set alphabetically was an advanced one)."""
    path: tuple[LoadedSet, ...] = ()
    """The sets in the order a learner meets them (the home page's): the starter, then the
    easiest on average first. In the bank's (file name) order, "Activation checkpointing", an
    advanced set, came first and the starter third (a newcomer's walk)."""

    def neighbours(
        self, loaded: LoadedQuestion
    ) -> tuple[LoadedSet | None, int, LoadedQuestion | None, LoadedQuestion | None]:
        """(its set, its position, the previous question, the next one), for a question of this
        bank; (None, 0, None, None) for one that is not (a question previewed in the studio)."""
        found = self.place.get(loaded.id)
        if found is None or found[0].questions[found[1]] is not loaded:
            return None, 0, None, None
        loaded_set, index = found
        siblings = loaded_set.questions
        return (
            loaded_set,
            index,
            siblings[index - 1] if index > 0 else None,
            siblings[index + 1] if index + 1 < len(siblings) else None,
        )


def index_of(bank: Bank) -> BankIndex:
    cached = bank.__dict__.get("_index")
    if cached is None:
        place = {q.id: (s, i) for s in bank.sets for i, q in enumerate(s.questions)}
        topics = Counter(q.question.topic for s in bank.sets for q in s.questions)
        starter = min(
            bank.sets,
            key=lambda s: -sum(q.question.difficulty == 1 for q in s.questions),
            default=None,
        )
        cached = bank.__dict__["_index"] = BankIndex(
            sets={s.id: s for s in bank.sets},
            place=place,
            topic_totals=dict(sorted(topics.items())),
            set_topics={s.id: sorted({q.question.topic for q in s.questions}) for s in bank.sets},
            count=len(place),
            versions={q.id: (q, q.fingerprint) for s in bank.sets for q in s.questions},
            starter=starter,
            path=tuple(
                sorted(
                    bank.sets,
                    key=lambda s: (s is not starter, _mean_difficulty(s), s.model.title.lower()),
                )
            ),
        )
    return cached


def _mean_difficulty(loaded_set: LoadedSet) -> float:
    return sum(q.question.difficulty for q in loaded_set.questions) / len(loaded_set.questions)
