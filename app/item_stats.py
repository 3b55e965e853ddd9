"""Item statistics from learners' attempts: how hard each question is, whether it separates
stronger from weaker learners, which wrong choices draw whom, and every attempt as CSV.

Pure functions over the bank and `Attempt` rows: no web, no database. Definitions:

- Only attempts at the question as it is now count: an attempt whose `fingerprint` differs from
  the question's current `LoadedQuestion.fingerprint` answered another version of it (an empty
  fingerprint, from before they were kept, counts). Attempts at ids no longer in the bank are left out.
- A learner's **first try** at a question is their earliest counted attempt at it.
- **Facility**: the share of learners right on their first try (None with no learner).
- A learner's **rest score** for a question: the share right on first tries of the *other*
  questions in the bank they answered (undefined for a learner who answered no other).
- **Discrimination**: the point-biserial correlation between the question's first-try score
  (1 right, 0 wrong) and the rest score, over the learners who have both:
  `r = (M1 - M0) / s * sqrt(p * (1 - p))`, where M1 and M0 are the mean rest scores of those
  right and wrong on their first try, p the share right, and s the population standard
  deviation of all their rest scores. None with fewer than 5 such learners, or when either has
  no variance (everyone right or everyone wrong, or every rest score the same). It is not the
  upper-lower 27 % index.
- **Distractors** (multiple choice): for each wrong choice (its index in the YAML), how many
  learners picked it on their first try, and their mean rest score (`picked_by_strength`).
- **Median seconds**: of first tries whose time is known (None when none is).
- Flags: `NEGATIVE` when discrimination is below zero; `STRONG_DISTRACTOR` when the strongest
  third of learners (by rest score, among at least 5 with one; learners tied with the last one
  in are in too) picked one wrong choice more often than they answered right.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.bank.load import Bank, LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion
from app.store import as_utc

if TYPE_CHECKING:
    from app.store import Attempt

MIN_LEARNERS = 5
"""Discrimination and the distractor flag need this many learners with a rest score."""
MOST_MISSED_MIN_LEARNERS = 3
NEGATIVE = "negative discrimination: check this key"
STRONG_DISTRACTOR = "strongest learners pick one distractor: check this key"


@dataclass
class ItemStats:
    question_id: str
    set_id: str
    learners: int
    """Learners with a counted attempt."""
    attempts: int
    """Counted attempts, every try."""
    facility: float | None
    discrimination: float | None
    median_seconds: float | None
    distractors: list[dict[str, Any]] = field(default_factory=list)
    """`{"index", "text", "picked", "picked_by_strength"}` per wrong choice, in the YAML's order."""
    flags: list[str] = field(default_factory=list)


@dataclass
class SetStats:
    set_id: str
    learners: int
    attempts: int
    facility: float | None
    """Mean facility of the set's questions that have one."""


def _order(attempt: Attempt) -> tuple:
    return (as_utc(attempt.created_at), attempt.id or 0)


def _counted(bank: Bank, attempts: Iterable[Attempt]) -> dict[str, list[Attempt]]:
    """Counted attempts per question id, oldest first."""
    by_question: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        loaded = bank.question(attempt.question_id)
        if loaded is not None and attempt.fingerprint in ("", loaded.fingerprint):
            by_question[attempt.question_id].append(attempt)
    for rows in by_question.values():
        rows.sort(key=_order)
    return by_question


def _first_tries(rows: list[Attempt]) -> dict[str, Attempt]:
    first: dict[str, Attempt] = {}
    for attempt in rows:  # oldest first
        first.setdefault(attempt.learner_id, attempt)
    return first


def point_biserial(scores: list[int], rest: list[float]) -> float | None:
    """The point-biserial correlation of 0/1 `scores` with `rest` (see the module docstring)."""
    n = len(scores)
    if n < MIN_LEARNERS:
        return None
    right = [r for s, r in zip(scores, rest, strict=True) if s]
    wrong = [r for s, r in zip(scores, rest, strict=True) if not s]
    sd = statistics.pstdev(rest)
    if not right or not wrong or sd == 0:
        return None
    p = len(right) / n
    return (statistics.fmean(right) - statistics.fmean(wrong)) / sd * math.sqrt(p * (1 - p))


def _picked(attempt: Attempt) -> set[int]:
    value = attempt.answer_value
    return {int(i) for i in value} if isinstance(value, list) else set()


def _strongest(rest: dict[str, float]) -> set[str]:
    """The top third by rest score (rounded up), with everyone tied with the last one in."""
    ranked = sorted(rest.values(), reverse=True)
    cut = ranked[math.ceil(len(ranked) / 3) - 1]
    return {learner for learner, score in rest.items() if score >= cut}


def _item(
    loaded: LoadedQuestion, rows: list[Attempt], firsts: dict[str, dict[str, bool]]
) -> ItemStats:
    first = _first_tries(rows)
    stats = ItemStats(loaded.id, loaded.set_id, len(first), len(rows), None, None, None)
    if first:
        stats.facility = sum(a.correct for a in first.values()) / len(first)
    seconds = [a.seconds for a in first.values() if a.seconds is not None]
    stats.median_seconds = statistics.median(seconds) if seconds else None
    rest: dict[str, float] = {}
    for learner in first:
        others = [right for qid, right in firsts[learner].items() if qid != loaded.id]
        if others:
            rest[learner] = sum(others) / len(others)
    stats.discrimination = point_biserial(
        [int(first[learner].correct) for learner in rest], list(rest.values())
    )
    if stats.discrimination is not None and stats.discrimination < 0:
        stats.flags.append(NEGATIVE)
    question = loaded.question
    if not isinstance(question, MultipleChoiceQuestion):
        return stats
    picks = {learner: _picked(attempt) for learner, attempt in first.items()}
    for index, choice in enumerate(question.choices):
        if choice.correct:
            continue
        who = [learner for learner, picked in picks.items() if index in picked]
        strengths = [rest[learner] for learner in who if learner in rest]
        stats.distractors.append({
            "index": index, "text": choice.text, "picked": len(who),
            "picked_by_strength": statistics.fmean(strengths) if strengths else None,
        })  # fmt: skip
    if len(rest) >= MIN_LEARNERS:
        top = _strongest(rest)
        right = sum(first[learner].correct for learner in top)
        if any(
            sum(d["index"] in picks[learner] for learner in top) > right for d in stats.distractors
        ):
            stats.flags.append(STRONG_DISTRACTOR)
    return stats


def question_stats(bank: Bank, attempts: Iterable[Attempt]) -> dict[str, ItemStats]:
    """Statistics of every question in the bank (with zeros and Nones where none was answered)."""
    counted = _counted(bank, attempts)
    firsts: dict[str, dict[str, bool]] = defaultdict(
        dict
    )  # learner -> question -> right first time
    for qid, rows in counted.items():
        for learner, attempt in _first_tries(rows).items():
            firsts[learner][qid] = attempt.correct
    return {q.id: _item(q, counted.get(q.id, []), firsts) for q in bank.questions}


def set_stats(bank: Bank, attempts: Iterable[Attempt]) -> dict[str, SetStats]:
    """Per set: learners who answered any of its questions, counted attempts, mean facility."""
    attempts = list(attempts)
    items = question_stats(bank, attempts)
    counted = _counted(bank, attempts)
    out = {}
    for loaded_set in bank.sets:
        ids = [q.id for q in loaded_set.questions]
        learners = {a.learner_id for qid in ids for a in counted.get(qid, [])}
        facilities = [f for qid in ids if (f := items[qid].facility) is not None]
        out[loaded_set.id] = SetStats(
            loaded_set.id, len(learners), sum(items[qid].attempts for qid in ids),
            statistics.fmean(facilities) if facilities else None,
        )  # fmt: skip
    return out


def most_missed(stats: dict[str, ItemStats], n: int = 10) -> list[ItemStats]:
    """The `n` questions with the lowest facility, among those at least 3 learners answered."""
    answered = [
        s
        for s in stats.values()
        if s.facility is not None and s.learners >= MOST_MISSED_MIN_LEARNERS
    ]
    return sorted(answered, key=lambda s: (s.facility, -s.learners, s.question_id))[:n]


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str) -> str:
    """A learner's free text, defused for spreadsheets: a leading formula character gets a `'`."""
    return "'" + text if text.startswith(_FORMULA) else text


def attempts_csv(bank: Bank, attempts: Iterable[Attempt]) -> str:
    """Every attempt, oldest first, for a gradebook: learner, set, question, kind, answer (the
    picked choice indices as a JSON list, or the predicted output), correct (1/0), first_try (1
    when it is the learner's first attempt at this version of the question), seconds (empty when
    unknown), at (ISO 8601, UTC)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        ["learner", "set", "question", "kind", "answer", "correct", "first_try", "seconds", "at"]
    )
    seen: set[tuple[str, str, str]] = set()
    for attempt in sorted(attempts, key=_order):
        loaded = bank.question(attempt.question_id)
        version = attempt.fingerprint or (loaded.fingerprint if loaded is not None else "")
        key = (attempt.learner_id, attempt.question_id, version)
        first = key not in seen
        seen.add(key)
        value = attempt.answer_value
        answer = json.dumps(value) if isinstance(value, list) else _cell(str(value))
        seconds = "" if attempt.seconds is None else f"{attempt.seconds:g}"
        writer.writerow([
            attempt.learner_id, attempt.set_id, attempt.question_id, attempt.kind, answer,
            int(attempt.correct), int(first), seconds, as_utc(attempt.created_at).isoformat(),
        ])  # fmt: skip
    return out.getvalue()
