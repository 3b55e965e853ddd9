"""Is a learner's answer right? Grading, and what the learner is shown afterwards.

Pure functions over bank questions; no web, no database. Both the pages and the API grade through
`grade`, which alone decides what kind of answer a question takes and how a misfit is worded.
(Checking an author's answer key against a run is another thing: `app.verify.check`.)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.bank.load import LoadedQuestion
from app.bank.public import correct_choices
from app.bank.schema import (
    DTYPE_NAME,
    NUMBER,
    SAME_DTYPE,
    Device,
    MultipleChoiceQuestion,
    PredictOutputQuestion,
    Tolerance,
)

if TYPE_CHECKING:
    from app.store import Attempt

LONGEST_PREDICTION = 2_000
"""The most characters a predicted output may have (the bank's longest answer has 117): every
attempt is stored, and 10,000 let one client grow the database by 4 MB a second."""


def as_typed(prediction: str) -> str:
    """A prediction as typed, whatever sent it: a browser sends each line break of a text box as
    CR LF, where the box's own limit counted one character (2,000 typed over 15 lines arrived as
    2,015 and were refused). Its length, against LONGEST_PREDICTION, is counted on this."""
    return prediction.replace("\r\n", "\n")


def normalise_output(text: str) -> str:
    """The documented comparison: line endings unified, trailing whitespace and blank lines dropped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n")


def accepted_outputs(question: PredictOutputQuestion) -> list[str]:
    """Every printed text that counts as right: the answer and its spellings, for the device the
    question asks about. What the code prints on another device never counts (a question about a
    machine without a GPU is not answered by what a GPU prints)."""
    device = question.asks_about
    here = next((text for d, text in question.device_answers.items() if d == device), None)
    texts = [question.answer, *question.accept, *([here] if here is not None else [])]
    return list(dict.fromkeys(normalise_output(t) for t in texts))


_WORDS = re.compile(r"(?<![\w.])(?i:true|false|none|-?inf|nan|not|no|never)(?!\w)")
"""Words compared on their own; inf with its sign (`inf` is not what `-inf` says), and a negation
(an accepted `skipped` for code printing `not skipped` was graded right)."""
_DEVICES = re.compile(r"(?<![\w.])(?:cpu|cuda(?::\d+)?|meta|mps|xpu)(?!\w)")
_NAMES = re.compile(r"[A-Za-z_][\w.]*")


def spelled_otherwise(spelling: str, printed: str) -> str | None:
    """Why an accepted spelling of an output does not say what `printed` says, or None when it
    does. It may leave words out (`0.33` for `tensor(0.3333)`) and spell a dtype otherwise
    (`half` for float16, `float32` for `torch.float32`), but never name what the code does not
    print: the same dtypes, devices and True/False/None/inf/nan in the same order, no other name
    the output lacks (`Parameter` for `Tensor`), and the same numbers to the digits the spelling
    gives, with at least two significant ones where it is not exact (`0.0` is not 1.5e-05, nor
    `2e-05`). An author's `accept` list is checked so against the run: `[torch.float16,
    torch.float32]` for code that prints float32 graded float16 right."""
    for what, found in (("dtypes", lambda t: [SAME_DTYPE.get(m, m) for m in DTYPE_NAME.findall(t)]),
                        ("devices", _DEVICES.findall), ("words", lambda t: [w.lower() for w in _WORDS.findall(t)])):  # fmt: skip
        if found(spelling) != found(printed):
            return f"names {', '.join(found(spelling)) or 'no ' + what} where the code prints {', '.join(found(printed)) or 'none'}"
    said, real = NUMBER.findall(spelling), NUMBER.findall(printed)
    if len(said) != len(real) or any(not _same_number(a, b) for a, b in zip(said, real)):
        return f"has the numbers {', '.join(said) or 'none'} where the code prints {', '.join(real) or 'none'}"
    if extra := _names_not_printed(spelling, printed):
        return f"names {', '.join(extra)}, which the code does not print"
    return None


def _names_not_printed(spelling: str, printed: str) -> list[str]:
    """The names in `spelling` that are not, in order, among those `printed` shows (a dotted
    name counts as its last part: `Tensor` is `torch.Tensor`). Numbers, dtypes, devices and
    True/False/None/inf/nan are compared on their own (see `spelled_otherwise`)."""

    def names(text: str) -> list[str]:
        for compared in (NUMBER, DTYPE_NAME, _DEVICES, _WORDS):
            text = compared.sub(" ", text)
        return [name.rsplit(".", 1)[-1] for name in _NAMES.findall(text)]

    shown = iter(names(printed))
    return [name for name in names(spelling) if name not in shown]


def _same_number(written: str, printed: str) -> bool:
    """`0.33` says 0.3333 (rounded to the digits written); `0.34` does not, nor `0.3` (one
    significant digit of a number that has more), nor `0.0` (any number but zero)."""
    if float(written) == float(printed):
        return True
    if (
        float(written) == 0
        or float(printed) == 0
        or _significant(written) < min(2, _significant(printed))
    ):
        return False
    digits = len(written.split(".")[1].split("e")[0].split("E")[0]) if "." in written else 0
    return math.isclose(
        float(written),
        float(printed),
        abs_tol=0.5 * 10 ** (-digits) * (10 ** _exponent(written)) + 1e-12,
    )


def _significant(number: str) -> int:
    """Significant digits written: `0.0330` has 3, `1e-05` 1, `65536.0` 6."""
    mantissa = number.lower().lstrip("+-").split("e")[0]
    digits = mantissa.replace(".", "").lstrip("0")
    return max(1, len(digits))


def _exponent(number: str) -> int:
    lowered = number.lower()
    return int(lowered.split("e")[1]) if "e" in lowered else 0


def _number_spelling(said: str, printed: str) -> str:
    """When every number is right but written differently (60000 for 60000.0, 1e-5 for 1e-05):
    side by side, the learner saw a wrong answer with the right values, and no reason."""
    got, want = NUMBER.findall(said), NUMBER.findall(printed)
    if (
        not want
        or len(got) != len(want)
        or NUMBER.split(" ".join(said.split())) != NUMBER.split(" ".join(printed.split()))
    ):
        return ""
    if any(float(a) != float(b) for a, b in zip(got, want)):
        return ""
    yours, its = next((a, b) for a, b in zip(got, want) if a != b)
    why = (
        " (a float prints with its decimal point)"
        if "." in its and "." not in yours and "e" not in its.lower()
        else ""
    )
    return f"Your numbers are right; Python writes them differently: it prints {its} where you wrote {yours}{why}."


def _lines_that_differ(said: str, printed: str) -> str:
    """Where a prediction of several lines goes wrong: which line, or how many lines it prints."""
    yours, its = said.split("\n"), printed.split("\n")
    if len(its) < 2 and len(yours) < 2:
        return ""
    if len(yours) != len(its):
        return f"It prints {len(its)} line{'s' if len(its) != 1 else ''}; you wrote {len(yours)}."
    differ = [i + 1 for i, (a, b) in enumerate(zip(yours, its)) if a != b]
    if not differ or len(differ) == len(its):
        return ""
    right = len(its) - len(differ)
    rest = "the other line is right" if right == 1 else f"the other {right} are right"
    if len(differ) == 1:
        return f"Only line {differ[0]} differs; {rest}."
    return f"Lines {', '.join(map(str, differ[:-1]))} and {differ[-1]} differ; {rest}."


def within_tolerance(submitted: str, expected: str, tolerance: Tolerance) -> bool:
    """Same text around the numbers (white space aside), and each number close enough."""
    got, want = NUMBER.findall(submitted), NUMBER.findall(expected)
    if not want or len(got) != len(want):
        return False
    if [" ".join(t.split()) for t in NUMBER.split(submitted)] != [
        " ".join(t.split()) for t in NUMBER.split(expected)
    ]:
        return False
    # A printed 0 is exact: the key of a scale that collapsed to 0.0 does not take 1.5e-05 (a scale
    # with a floor, the very misconception), whatever the absolute tolerance.
    return all(float(a) == 0 if float(b) == 0 else math.isclose(float(a), float(b), rel_tol=tolerance.rel, abs_tol=tolerance.abs)
               for a, b in zip(got, want))  # fmt: skip


def describe_tolerance(tolerance: Tolerance | None) -> str:
    """ "0.2 %", "±0.006", "0.2 % or ±0.006": how close a printed number must be, in words."""
    if tolerance is None:
        return ""
    parts = ([f"{tolerance.rel * 100:g} %"] if tolerance.rel else []) + (
        [f"±{tolerance.abs:g}"] if tolerance.abs else []
    )
    return " or ".join(parts)


TYPOGRAPHIC = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "}
)
"""What a phone's keyboard types for plain quotes and spaces: Python never prints these for them,
so a learner's `<class ‘torch.Tensor’>` means `<class 'torch.Tensor'>`."""


def grade_output(question: PredictOutputQuestion, submitted: str) -> bool:
    said = normalise_output(submitted.translate(TYPOGRAPHIC))
    # The key too: code that prints a no-break space was proved, and a learner's (even the key
    # pasted) became a plain one and was wrong.
    accepted = [a.translate(TYPOGRAPHIC) for a in accepted_outputs(question)]
    if said in accepted:
        return True
    tolerance = question.tolerance
    return tolerance is not None and any(within_tolerance(said, a, tolerance) for a in accepted)


def grade_choices(question: MultipleChoiceQuestion, picked: set[int]) -> bool:
    """Right only when exactly the correct choices are picked (all of them, and nothing else)."""
    return set(picked) == correct_choices(question)


class AnswerError(ValueError):
    """The submitted answer does not fit the question. Its text is a sentence shown as it is."""


@dataclass
class Feedback:
    index: int
    """The choice's identity: its place in the YAML file, whatever order a learner sees."""
    text: str
    why: str
    correct: bool
    picked: bool
    position: int = 0
    """Where the learner saw it (0 is the first, "A")."""


@dataclass
class GradedAnswer:
    """How a learner's answer went, with everything they are shown afterwards."""

    correct: bool
    kind: str
    picked: list[int] = field(default_factory=list)
    output: str | None = None
    choices: list[Feedback] = field(default_factory=list)
    expected_output: str | None = None
    device_answers: dict[Device, str] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    tolerance: str = ""
    """How close printed numbers must be, in words ("0.2 %"), when the question has a tolerance."""
    asks_about: str = "cpu"
    explanation: str = ""

    @property
    def answer(self) -> Any:
        return self.picked if self.kind == "multiple_choice" else self.output

    @property
    def near_miss(self) -> str:
        """What a wrong prediction got wrong when it is only spacing or capitals, or "": the two
        texts side by side looked the same, and the learner hunted for the difference."""
        if (
            self.correct
            or self.kind != "predict_output"
            or not self.output
            or self.expected_output is None
        ):
            return ""
        said, printed = normalise_output(self.output), normalise_output(self.expected_output)
        if said.split() == printed.split():
            return "It differs from what the code prints only in spacing or line breaks: the output has them exactly as shown."
        if said.lower() == printed.lower():
            return "It differs from what the code prints only in capitals: Python prints them exactly as shown (True, not true)."
        return _number_spelling(said, printed) or _lines_that_differ(said, printed)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "correct": self.correct,
            "kind": self.kind,
            "explanation": self.explanation,
        }
        if self.kind == "multiple_choice":
            # Outward, a choice is its position in the learner's order, as in the question and
            # the answer (`picked_at`); its identity stays inside the server.
            data["picked"] = [c.position for c in self.choices if c.picked]
            data["correct_choices"] = [c.position for c in self.choices if c.correct]
            data["choices"] = [{**vars(c), "index": c.position} for c in self.choices]
        else:
            data["output"] = self.output
            data["expected_output"] = self.expected_output
            data["near_miss"] = self.near_miss
            data["accepted"] = self.accepted
            data["tolerance"] = self.tolerance
            data["asks_about"] = self.asks_about
            data["device_answers"] = self.device_answers
        return data


def grade(
    loaded: LoadedQuestion,
    *,
    picked: list[int] | None = None,
    output: str | None = None,
    order: list[int] | None = None,
) -> GradedAnswer:
    """Grades one answer: the picked choices (by identity) for a multiple-choice question, the
    predicted output for a predict-output one; the feedback lists choices in `order` (the
    learner's). Raises AnswerError when it cannot be an answer to this question."""
    q = loaded.question
    if isinstance(q, MultipleChoiceQuestion):
        if picked is None:
            raise AnswerError("This is a multiple-choice question: send the picked choices.")
        chosen = sorted(set(picked))
        bad = [i for i in chosen if not 0 <= i < len(q.choices)]
        if bad:
            raise AnswerError(
                f"Choice {bad[0]} does not exist (this question has {len(q.choices)})."
            )
        if not chosen:
            raise AnswerError("Pick an answer first.")
        shown = (
            order
            if order is not None and sorted(order) == list(range(len(q.choices)))
            else range(len(q.choices))
        )
        feedback = [
            Feedback(
                i, q.choices[i].text, q.choices[i].why, q.choices[i].correct, i in chosen, position
            )
            for position, i in enumerate(shown)
        ]
        return GradedAnswer(
            grade_choices(q, set(chosen)),
            q.kind,
            picked=chosen,
            choices=feedback,
            explanation=q.explanation,
        )
    assert isinstance(q, PredictOutputQuestion)
    if output is None:
        raise AnswerError("This question asks what the code prints: send the output.")
    if not output.strip():
        raise AnswerError("Type what you think it prints first.")
    output = as_typed(output)
    if len(output) > LONGEST_PREDICTION:
        raise AnswerError(
            f"That prediction is {len(output):,} characters long; the most it may be is {LONGEST_PREDICTION:,}. "
            "Shorten it and check again."
        )
    return GradedAnswer(
        grade_output(q, output),
        q.kind,
        output=output,
        expected_output=normalise_output(q.answer),
        device_answers=dict(q.device_answers),
        accepted=[normalise_output(a) for a in q.accept],
        tolerance=describe_tolerance(q.tolerance),
        asks_about=q.asks_about,
        explanation=q.explanation,
    )


def regrade(
    loaded: LoadedQuestion, attempt: Attempt, order: list[int] | None = None
) -> GradedAnswer | None:
    """A stored attempt, shown again (None when it answered another version of the question)."""
    if attempt.fingerprint and attempt.fingerprint != loaded.fingerprint:
        return None
    value = attempt.answer_value
    try:
        if isinstance(loaded.question, MultipleChoiceQuestion) and isinstance(value, list):
            out = grade(loaded, picked=[int(v) for v in value], order=order)
        elif isinstance(loaded.question, PredictOutputQuestion) and isinstance(value, str):
            out = grade(loaded, output=value)
        else:
            return None
    except AnswerError:
        return None
    out.correct = attempt.correct  # as graded then
    return out
