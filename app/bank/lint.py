"""Checks beyond the format that warn an author without leaving a file out: answer keys a
learner could not type without running the code."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction
from typing import Protocol

from app.bank.problem import Problem
from app.bank.schema import (
    DTYPE_NAME,
    NUMBER,
    SAME_DTYPE,
    MultipleChoiceQuestion,
    PredictOutputQuestion,
)
from app.bank.unrepeatable import unrepeatable


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
    """A question and where it is (a `LoadedQuestion`); read, never written."""

    @property
    def id(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def col(self) -> int: ...
    @property
    def question(self) -> MultipleChoiceQuestion | PredictOutputQuestion: ...


def warnings(questions: Iterable[Located]) -> list[Problem]:
    out = []
    for lq in questions:
        q = lq.question
        if isinstance(q, MultipleChoiceQuestion):
            said = [*_words_against_outcomes(q), *_longest_is_right(q)]
            out += [Problem(lq.path, lq.line, lq.col, f"warning: [{lq.id}] {why}") for why in said]
        if q.code:
            out += [Problem(lq.path, lq.line, lq.col, f"warning: [{lq.id}] the code {why}, so what it prints may differ "
                            "in another Python process, whatever two runs here show: print what does not depend on it")
                    for why in unrepeatable(q.code)]  # fmt: skip
        if not isinstance(q, PredictOutputQuestion) or q.tolerance is not None:
            continue
        hard = [n for n in NUMBER.findall(q.answer) if underivable(n)]
        if hard:
            out.append(Problem(lq.path, lq.line, lq.col,
                f"warning: [{lq.id}] the answer prints {hard[0]}, which no one could type without "
                "running the code: add a `tolerance` (e.g. {rel: 0.001}) or print a rounded value"))  # fmt: skip
    return out


_PRINTS = re.compile(r"\bprints?\b", re.IGNORECASE)
_NO_ERROR = re.compile(
    r"\b(?:no (?:exception|error)s?\b|(?:runs?|works?|finish(?:es)?) (?:fine|without (?:an? )?(?:error|exception))|"
    r"it works\b|nothing (?:is )?raised|does not raise|doesn't raise|succeeds\b)",
    re.IGNORECASE,
)
"""Words that say the code ends without an exception."""
_RAISED = re.compile(r"(?<![\w.])(?:\w+\.)*(\w*(?:Error|Exception|Warning))(?!\w)")
_NO_WARNING = re.compile(
    r"\bsilently\b|\bno warnings?\b|without (?:a |any )?warnings?\b|does(?: not|n't) warn",
    re.IGNORECASE,
)
"""Words that say the code runs without a warning."""


def words_against_key(q: MultipleChoiceQuestion) -> list[str]:
    """`_words_against_outcomes` of the right choices alone: the live server holds such a key back
    (`app.verify.proofs`), since a learner is graded right for picking words the run contradicts."""
    return _words_against_outcomes(q, right_only=True)


def _words_against_outcomes(q: MultipleChoiceQuestion, right_only: bool = False) -> list[str]:
    """A choice whose words say another thing than its outcome: a run checks the outcome, and the
    learner reads the words. Its text names dtypes and its outcome prints others, or it names
    exceptions or warnings and its outcome raises or warns another, or it says the code runs
    silently and its outcome warns: swapped texts (the right choice reading "It prints
    torch.float32" over an outcome of bfloat16, or "prints torch.float32 silently" over one that
    warns) passed every check."""
    said = []
    for number, choice in enumerate(q.choices, 1):
        if right_only and not choice.correct:
            continue
        for outcome in (choice.outcome, *choice.device_outcome.values()):
            if outcome is None:
                continue
            printed = " ".join([outcome.stdout or "", *outcome.stdout_contains])
            named, shown = _dtypes(choice.text), _dtypes(printed)
            if named and shown and not named & shown:
                said.append(f"choice {number}'s text names {', '.join(sorted(named))}, but its outcome prints "
                            f"{', '.join(sorted(shown))}: does the text say what the run does?")  # fmt: skip
            named = set(_RAISED.findall(choice.text))
            ends = {kind.rsplit(".", 1)[-1] for kind in (outcome.raises, outcome.warns) if kind}
            if named and ends and not named & ends:
                said.append(f"choice {number}'s text names {', '.join(sorted(named))}, but its outcome is "
                            f"{', '.join(sorted(ends))}: does the text say what the run does?")  # fmt: skip
            elif outcome.raises and _NO_ERROR.search(choice.text):
                said.append(f"choice {number}'s text says the code ends without an error, but its outcome raises "
                            f"{outcome.raises}: does the text say what the run does?")  # fmt: skip
            elif outcome.raises and not named and _PRINTS.search(choice.text):
                said.append(f"choice {number}'s text says the code prints, but its outcome raises {outcome.raises}: "
                            "does the text say what the run does?")  # fmt: skip
            elif (
                named
                and not outcome.raises
                and not outcome.warns
                and not _PRINTS.search(choice.text)
            ):
                said.append(f"choice {number}'s text names {', '.join(sorted(named))}, but its outcome raises "
                            "nothing: does the text say what the run does?")  # fmt: skip
            if outcome.warns and _NO_WARNING.search(choice.text):
                said.append(f"choice {number}'s text says the code runs without a warning, but its outcome warns "
                            f"{outcome.warns}: does the text say what the run does?")  # fmt: skip
    return list(dict.fromkeys(said))


_PROSE_FLOATS = re.compile(r"(?<![\w.])(?:torch\.)?(b?float\d+|bf16|fp\d+)(?!\w)", re.IGNORECASE)
"""Floating dtypes as prose writes them too: `FP16`, `BF16`, `Float32`, `BFloat16` (a right choice
reading "FP16, like CUDA" over an outcome of bfloat16 passed the words check)."""
_PROSE_SAME = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}


def _dtypes(text: str) -> set[str]:
    named = {SAME_DTYPE.get(name, name) for name in DTYPE_NAME.findall(text)}
    return named | {
        _PROSE_SAME.get(name.lower(), name.lower()) for name in _PROSE_FLOATS.findall(text)
    }


LONGEST_RIGHT = 1.5
"""How much longer than every wrong choice a right one may be before lint says so."""


def _longest_is_right(q: MultipleChoiceQuestion) -> list[str]:
    """A right choice far longer than every wrong one: a candidate who picks the longest scores
    without knowing the answer (in the bank this was so for 59 of 73 questions, 38 of them by
    half again or more)."""
    right = max(len(c.text) for c in q.choices if c.correct)
    wrong = [len(c.text) for c in q.choices if not c.correct]
    if not wrong or right < LONGEST_RIGHT * max(wrong):
        return []
    said = (f"the right choice is {right / max(wrong):.1f} times as long as the longest wrong one, so the longest "
            "is the one to pick: move its detail into its `why`, or give the wrong ones as much")  # fmt: skip
    return [said]
