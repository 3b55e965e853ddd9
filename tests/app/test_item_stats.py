"""Item statistics from a seeded set of learners with known answers, checked against values
worked out by hand here: facility, discrimination (the point-biserial, its formula written out
below), distractor counts and who picks them, the flags, most-missed, per set, and the CSV."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.bank.load import Bank, load_bank
from app.item_stats import (
    NEGATIVE,
    STRONG_DISTRACTOR,
    attempts_csv,
    most_missed,
    question_stats,
    set_stats,
)
from app.store import Attempt

LEARNERS = ["L1", "L2", "L3", "L4", "L5", "L6"]
ITEMS = ["mc1", "mc2", "po1", "po2", "bad"]
FIRST_TRIES = {  # right (1) or wrong (0) on the first try, per learner, in ITEMS' order
    "L1": [1, 1, 1, 1, 0],
    "L2": [1, 1, 1, 0, 0],
    "L3": [0, 1, 1, 0, 0],
    "L4": [1, 0, 0, 1, 1],
    "L5": [0, 0, 1, 0, 1],
    "L6": [0, 0, 0, 0, 1],
}
MC1_WRONG_PICKS = {"L3": 1, "L5": 1, "L6": 2}  # the wrong choice each learner who missed mc1 picked
MC1_SECONDS = {"L1": 10.0, "L2": 20.0, "L3": None, "L4": 40.0, "L5": 30.0, "L6": None}


def _mc(qid: str, choices: list[tuple[str, bool]]) -> str:
    head = (f"  - id: {qid}\n    kind: multiple_choice\n    topic: t\n    difficulty: 1\n    prompt: p\n"
            "    explanation: e\n    source: s\n    choices:\n")  # fmt: skip
    lines = [head]
    lines += [
        f"      - {{text: {text}, correct: {str(right).lower()}, why: w}}\n"
        for text, right in choices
    ]
    return "".join(lines)


def _po(qid: str) -> str:
    return (f"  - id: {qid}\n    kind: predict_output\n    topic: t\n    difficulty: 1\n    prompt: p\n"
            "    code: print(1)\n    answer: '1'\n    explanation: e\n    source: s\n")  # fmt: skip


@pytest.fixture
def bank(tmp_path: Path) -> Bank:
    (tmp_path / "s1.yaml").write_text(
        "title: One\ndescription: d\nquestions:\n"
        + _mc("mc1", [("A", True), ("B", False), ("C", False), ("D", False)])
        + _mc("mc2", [("X", False), ("Y", True), ("Z", False)]) + _po("po1") + _po("po2")
    )  # fmt: skip
    (tmp_path / "s2.yaml").write_text(
        "title: Two\ndescription: d\nquestions:\n"
        + _mc("bad", [("keyed", True), ("popular", False), ("other", False)]) + _po("unanswered")
    )  # fmt: skip
    loaded = load_bank(tmp_path)
    assert not loaded.problems, loaded.problems
    return loaded


T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _attempt(bank: Bank, learner: str, qid: str, right: bool, *, minute: int, picked: list[int] | None = None,
             seconds: float | None = None, fingerprint: str | None = None) -> Attempt:  # fmt: skip
    loaded = bank.question(qid)
    assert loaded is not None
    q = loaded.question
    if q.kind == "multiple_choice":
        answer = json.dumps(
            picked if picked is not None else [i for i, c in enumerate(q.choices) if c.correct]
        )
    else:
        answer = json.dumps("1" if right else "2")
    return Attempt(
        learner_id=learner, question_id=qid, set_id=loaded.set_id, topic="t", kind=q.kind, answer=answer,
        correct=right, created_at=T0 + timedelta(minutes=minute), seconds=seconds,
        fingerprint=loaded.fingerprint if fingerprint is None else fingerprint,
    )  # fmt: skip


def seeded(bank: Bank) -> list[Attempt]:
    """The first tries in FIRST_TRIES, plus what must not change them: retries, an attempt at an
    earlier version of mc1 (another fingerprint), attempts kept before fingerprints (empty: they
    count), and an attempt at a question no longer in the bank."""
    rows = []
    for n, learner in enumerate(LEARNERS):
        for i, qid in enumerate(ITEMS):
            right = bool(FIRST_TRIES[learner][i])
            picked = None
            if qid == "mc1" and not right:
                picked = [MC1_WRONG_PICKS[learner]]
            elif qid == "mc2" and not right:
                picked = [0]
            elif qid == "bad":
                picked = [0] if right else [1]  # the three strongest all pick "popular"
            seconds = MC1_SECONDS[learner] if qid == "mc1" else 15.0
            fingerprint = "" if learner == "L1" else None
            rows.append(_attempt(bank, learner, qid, right, minute=100 + 10 * n + i, picked=picked,
                                 seconds=seconds, fingerprint=fingerprint))  # fmt: skip
    rows.append(
        _attempt(bank, "L3", "mc1", True, minute=500, seconds=5.0)
    )  # a retry: right this time
    rows.append(_attempt(bank, "L5", "mc1", True, minute=501, seconds=5.0))
    rows.append(
        _attempt(bank, "L6", "mc1", True, minute=1, fingerprint="0123456789abcdef")
    )  # old version
    rows.append(_attempt(bank, "L6", "po1", True, minute=2, fingerprint="0123456789abcdef"))
    gone = _attempt(bank, "L1", "po1", True, minute=3)
    gone.question_id = "removed-question"
    rows.append(gone)
    return rows


def point_biserial_by_hand(pairs: list[tuple[int, float]]) -> float:
    """r_pb = (M1 - M0) / s_n * sqrt(p * q): M1, M0 the mean rest score of those right and wrong on
    the item, s_n the population standard deviation of all the rest scores, p the share right, q = 1 - p."""
    n = len(pairs)
    right = [rest for score, rest in pairs if score == 1]
    wrong = [rest for score, rest in pairs if score == 0]
    m1, m0 = sum(right) / len(right), sum(wrong) / len(wrong)
    mean = sum(rest for _, rest in pairs) / n
    s_n = math.sqrt(sum((rest - mean) ** 2 for _, rest in pairs) / n)
    p = len(right) / n
    return (m1 - m0) / s_n * math.sqrt(p * (1 - p))


def rest_scores(item: str) -> dict[str, float]:
    """Share right on the first tries of the other four questions."""
    i = ITEMS.index(item)
    return {lr: (sum(FIRST_TRIES[lr]) - FIRST_TRIES[lr][i]) / (len(ITEMS) - 1) for lr in LEARNERS}


def test_facility_and_discrimination_match_the_hand_computation(bank: Bank) -> None:
    stats = question_stats(bank, seeded(bank))
    mc1 = stats["mc1"]
    assert (mc1.learners, mc1.attempts) == (
        6,
        8,
    )  # 6 first tries and 2 retries; the old version not counted
    assert mc1.facility == pytest.approx(
        3 / 6
    )  # L1, L2, L4 right first time (retries do not count)
    # Rest scores for mc1, by hand from the table: L1 3/4, L2..L5 2/4, L6 1/4.
    assert rest_scores("mc1") == {
        "L1": 0.75,
        "L2": 0.5,
        "L3": 0.5,
        "L4": 0.5,
        "L5": 0.5,
        "L6": 0.25,
    }
    pairs = [(FIRST_TRIES[lr][0], rest_scores("mc1")[lr]) for lr in LEARNERS]
    # M1 = (3/4 + 2/4 + 2/4) / 3 = 7/12, M0 = (2/4 + 2/4 + 1/4) / 3 = 5/12, s_n = sqrt(1/48), p = q = 1/2:
    # r = (2/12) / sqrt(1/48) * 1/2 = 1/sqrt(3)
    assert point_biserial_by_hand(pairs) == pytest.approx(1 / math.sqrt(3))
    assert mc1.discrimination == pytest.approx(1 / math.sqrt(3))

    bad = stats["bad"]
    assert bad.facility == pytest.approx(0.5)
    # Rest scores 1, 3/4, 2/4, 2/4, 1/4, 0; the right ones (L4-L6) are the weaker: M1 = 1/4, M0 = 3/4,
    # s_n = sqrt(0.625 / 6): r = -0.5 / sqrt(0.625 / 6) * 1/2 = -sqrt(3/5)
    pairs = [(FIRST_TRIES[lr][4], rest_scores("bad")[lr]) for lr in LEARNERS]
    assert point_biserial_by_hand(pairs) == pytest.approx(-math.sqrt(3 / 5))
    assert bad.discrimination == pytest.approx(-math.sqrt(3 / 5))

    for item in ("mc2", "po1", "po2"):
        i = ITEMS.index(item)
        assert stats[item].facility == pytest.approx(sum(FIRST_TRIES[lr][i] for lr in LEARNERS) / 6)
        pairs = [(FIRST_TRIES[lr][i], rest_scores(item)[lr]) for lr in LEARNERS]
        assert stats[item].discrimination == pytest.approx(point_biserial_by_hand(pairs))
    assert stats["unanswered"].learners == 0 and stats["unanswered"].facility is None


def test_distractors_counts_and_strength(bank: Bank) -> None:
    stats = question_stats(bank, seeded(bank))
    # mc1's wrong first tries: L3 and L5 picked B (index 1; rest 2/4 each), L6 picked C (index 2; rest 1/4).
    assert stats["mc1"].distractors == [
        {"index": 1, "text": "B", "picked": 2, "picked_by_strength": pytest.approx(0.5)},
        {"index": 2, "text": "C", "picked": 1, "picked_by_strength": pytest.approx(0.25)},
        {"index": 3, "text": "D", "picked": 0, "picked_by_strength": None},
    ]
    # bad: L1-L3 (rest 1, 3/4, 2/4) picked "popular".
    assert stats["bad"].distractors[0] == {
        "index": 1,
        "text": "popular",
        "picked": 3,
        "picked_by_strength": pytest.approx(0.75),
    }
    assert stats["po1"].distractors == []


def test_flags(bank: Bank) -> None:
    stats = question_stats(bank, seeded(bank))
    # bad: discrimination below zero; the strongest third (L1, L2: rest 1 and 3/4) both picked
    # "popular" and neither was right: 2 > 0.
    assert stats["bad"].flags == [NEGATIVE, STRONG_DISTRACTOR]
    # mc1: the top third is L1 (3/4) and, tied at 2/4, L2-L5: 3 of them right, 2 picked B: 2 < 3.
    assert stats["mc1"].flags == []
    # po1: M1 = (3/4 + 2/4 + 1/4 + 1/4) / 4 = 7/16 is below M0 = (3/4 + 1/4) / 2 = 8/16: negative too.
    pairs = [(FIRST_TRIES[lr][2], rest_scores("po1")[lr]) for lr in LEARNERS]
    assert point_biserial_by_hand(pairs) < 0
    assert stats["po1"].flags == [NEGATIVE]
    assert (
        stats["mc2"].discrimination == pytest.approx(0) and stats["mc2"].flags == []
    )  # M1 = M0 = 1/2
    assert stats["po2"].flags == []


def test_median_seconds_of_first_tries(bank: Bank) -> None:
    stats = question_stats(bank, seeded(bank))
    assert stats["mc1"].median_seconds == pytest.approx(
        25.0
    )  # 10, 20, 30, 40 (two unknown; retries not counted)
    assert stats["unanswered"].median_seconds is None


def test_most_missed_and_sets(bank: Bank) -> None:
    stats = question_stats(bank, seeded(bank))
    # facilities: po2 2/6, then bad, mc1, mc2 at 3/6 (by id), po1 4/6
    assert [s.question_id for s in most_missed(stats)] == ["po2", "bad", "mc1", "mc2", "po1"]
    assert [s.question_id for s in most_missed(stats, n=2)] == ["po2", "bad"]
    sets = set_stats(bank, seeded(bank))
    assert (sets["s1"].learners, sets["s1"].attempts) == (6, 6 * 4 + 2)
    assert sets["s1"].facility == pytest.approx((3 / 6 + 3 / 6 + 4 / 6 + 2 / 6) / 4)
    assert (sets["s2"].learners, sets["s2"].attempts) == (6, 6)
    assert sets["s2"].facility == pytest.approx(
        3 / 6
    )  # the unanswered question has no facility to average


def test_too_few_learners_or_no_variance_gives_no_discrimination(bank: Bank) -> None:
    four = [_attempt(bank, lr, q, right, minute=i) for i, (lr, right) in enumerate(zip("ABCD", [1, 0, 1, 0], strict=True))
            for q in ("mc1", "po1")]  # fmt: skip
    stats = question_stats(bank, four)
    assert stats["mc1"].learners == 4 and stats["mc1"].facility == pytest.approx(0.5)
    assert stats["mc1"].discrimination is None and stats["mc1"].flags == []
    assert most_missed(stats) == [stats["mc1"], stats["po1"]]  # 4 learners: enough for most-missed
    everyone_right = [
        _attempt(bank, lr, q, True, minute=i)
        for i, lr in enumerate("ABCDEF")
        for q in ("mc1", "po1")
    ]
    assert question_stats(bank, everyone_right)["mc1"].discrimination is None
    two = [_attempt(bank, lr, "mc2", False, minute=i, picked=[0]) for i, lr in enumerate("AB")]
    assert most_missed(question_stats(bank, two)) == []  # fewer than 3 learners


def test_attempts_csv(bank: Bank) -> None:
    rows = [
        _attempt(bank, "L1", "po1", False, minute=1, seconds=12.5),
        _attempt(bank, "L1", "po1", True, minute=2),
        _attempt(bank, "L1", "mc1", False, minute=3, picked=[1, 2]),
    ]
    rows[0].answer = json.dumps('=HYPERLINK("x")')  # a learner's text that a spreadsheet would run
    table = list(csv.reader(io.StringIO(attempts_csv(bank, reversed(rows)))))
    assert table == [
        ["learner", "set", "question", "kind", "answer", "correct", "first_try", "seconds", "at"],
        [
            "L1",
            "s1",
            "po1",
            "predict_output",
            '\'=HYPERLINK("x")',
            "0",
            "1",
            "12.5",
            "2026-11-01T00:01:00+00:00",
        ],
        ["L1", "s1", "po1", "predict_output", "1", "1", "0", "", "2026-11-01T00:02:00+00:00"],
        ["L1", "s1", "mc1", "multiple_choice", "[1, 2]", "0", "1", "", "2026-11-01T00:03:00+00:00"],
    ]
