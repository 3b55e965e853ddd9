"""Checks beyond the format that warn an author without leaving a file out: answer keys a
learner could not type without running the code."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Protocol

from app.bank.problem import Problem
from app.bank.schema import NUMBER, MultipleChoiceQuestion, PredictOutputQuestion


def underivable(number: str) -> bool:
    """A printed value no one derives to the last digit: four or more non-zero digits, and not a
    plain float16 value (an integer, or a fraction over a power of two, with up to 24 bits:
    65504.0, 458752.0 and 0.0009765625 are worked out on paper; 0.2448 and 9.1553e-06 are not)."""
    mantissa = number.lower().split("e")[0]
    if sum(d in "123456789" for d in mantissa) < 4:
        return False
    value = Fraction(number)
    power_of_two = value.denominator & (value.denominator - 1) == 0
    return not (power_of_two and abs(value.numerator) < 1 << 24)


class Located(Protocol):
    """A question and where it is (a `LoadedQuestion`)."""

    id: str
    path: str
    line: int
    col: int
    question: MultipleChoiceQuestion | PredictOutputQuestion


def warnings(questions: Iterable[Located]) -> list[Problem]:
    out = []
    for lq in questions:
        q = lq.question
        if not isinstance(q, PredictOutputQuestion) or q.tolerance is not None:
            continue
        hard = [n for n in NUMBER.findall(q.answer) if underivable(n)]
        if hard:
            out.append(Problem(lq.path, lq.line, lq.col,
                f"warning: [{lq.id}] the answer prints {hard[0]}, which no one could type without "
                "running the code: add a `tolerance` (e.g. {rel: 0.001}) or print a rounded value"))  # fmt: skip
    return out
