"""Each learner's summary (`LearnerData`) kept between their requests by one process, and brought
up to date with the attempts they made since, instead of read whole again.

A learner's progress page read the last answer to every question they answered, every review
card and their newest attempts: at 172 questions answered, about a fifth of the web's CPU under
bench/learners.py, and the page comes right after an answer, so a summary kept as it was is never
current there. What changes with an answer is small: its attempt, the question's last answer, its
card, its topic's counts. `Store.learner_data` reads those (`KeptSummary.catch_up`) and checks the
result is whole before it is used (`whole_with`); anything else reads the summary whole again.

No database here: `app.store.repository` reads, this module keeps and merges. Summaries handed out are never
changed afterwards (a newer one is a new object), so a page may keep using the one it got.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from app.store.rows import AttemptRow, CardRow, LearnerData, attempts_in


@dataclass(frozen=True)
class KeptSummary:
    """A learner's summary. It holds exactly the attempts its topic counts add up to
    (`data.attempts`): every stored attempt adds to them in its own transaction."""

    latest: dict[tuple[str, str], tuple[int, bool]]
    """(question id, fingerprint) -> (attempt id, right) of the last attempt at each version,
    oldest first (a dict keeps the order things were put in)."""
    recent_kept: int
    """How many newest attempts `data.recent` holds at most."""
    data: LearnerData

    @classmethod
    def of(
        cls, data: LearnerData, latest: list[tuple[str, str, bool, int]], recent_kept: int
    ) -> KeptSummary:
        """A summary read whole; `latest` with each row's attempt id, oldest first."""
        return cls(
            {(q, f): (attempt_id, right) for q, f, right, attempt_id in latest}, recent_kept, data
        )

    @property
    def last_id(self) -> int:
        """The newest attempt it holds (0: none): the last answer to some version of a question."""
        return next(reversed(self.latest.values()), (0, False))[0]

    def whole_with(self, since: list[AttemptRow], by_topic: dict[str, tuple[int, int]]) -> bool:
        """Whether this summary and the attempts made since (`since`, read before the topic counts
        `by_topic`) are every attempt counted now. An attempt stored out of id order (two answers
        of one learner committing in the other order), or stored between the two reads, makes
        them fewer: the summary is then read whole again."""
        return self.data.attempts + len(since) == attempts_in(by_topic)

    def catch_up(self, since: list[AttemptRow], by_topic: dict[str, tuple[int, int]],
                 cards: dict[str, CardRow]) -> KeptSummary:  # fmt: skip
        """This summary with the attempts made since (oldest first), the topic counts read now and
        the cards of the questions they answered as read now."""
        latest = dict(self.latest)
        for attempt in since:
            key = (attempt.question_id, attempt.fingerprint)
            latest.pop(key, None)  # the newest attempt goes last
            latest[key] = (attempt.id, attempt.correct)
        recent = [*reversed(since), *self.data.recent][: self.recent_kept]
        data = LearnerData(
            latest=[(q, f, right) for (q, f), (_, right) in latest.items()],
            by_topic=by_topic,
            cards={**self.data.cards, **cards},
            recent=recent,
        )
        return replace(self, latest=latest, data=data)


class KeptSummaries:
    """The summaries of the learners this process served last (at most `size`), by learner id."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: OrderedDict[str, KeptSummary] = OrderedDict()
        self._lock = threading.Lock()  # the page threads share it

    def get(self, learner_id: str) -> KeptSummary | None:
        with self._lock:
            kept = self._kept.get(learner_id)
            if kept is not None:
                self._kept.move_to_end(learner_id)
            return kept

    def put(self, learner_id: str, kept: KeptSummary) -> None:
        with self._lock:
            self._kept[learner_id] = kept
            self._kept.move_to_end(learner_id)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


def as_asked(kept: KeptSummary, recent: int) -> LearnerData:
    """The summary with at most `recent` newest attempts, as `Store.learner_data` was asked."""
    data = kept.data
    return data if len(data.recent) <= recent else replace(data, recent=data.recent[:recent])
