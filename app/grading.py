"""Is a learner's answer right? Grading, and what the learner is shown afterwards.

Pure functions over bank questions; no web, no database. Both the pages and the API grade through
`grade`, which alone decides what kind of answer a question takes and how a misfit is worded.
(Checking an author's answer key against a run is another thing: `app.verify.check`.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.bank.load import LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion, PredictOutputQuestion

if TYPE_CHECKING:
    from app.store import Attempt


def normalise_output(text: str) -> str:
    """The documented comparison: line endings unified, trailing whitespace and blank lines dropped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n")


def accepted_outputs(question: PredictOutputQuestion) -> list[str]:
    """Every printed text that counts as right: the answer, its spellings, and per-device answers."""
    return [normalise_output(t) for t in [question.answer, *question.accept, *question.device_answers.values()]]


def grade_output(question: PredictOutputQuestion, submitted: str) -> bool:
    return normalise_output(submitted) in accepted_outputs(question)


def correct_choices(question: MultipleChoiceQuestion) -> set[int]:
    return {i for i, choice in enumerate(question.choices) if choice.correct}


def grade_choices(question: MultipleChoiceQuestion, picked: set[int]) -> bool:
    """Right only when exactly the correct choices are picked (all of them, and nothing else)."""
    return set(picked) == correct_choices(question)


def multiple_answers(question: MultipleChoiceQuestion) -> bool:
    """Checkboxes ("pick every right answer") rather than radio buttons."""
    return len(correct_choices(question)) > 1


class AnswerError(ValueError):
    """The submitted answer does not fit the question. Its text is a sentence shown as it is."""


@dataclass
class Feedback:
    index: int
    text: str
    why: str
    correct: bool
    picked: bool


@dataclass
class GradedAnswer:
    """How a learner's answer went, with everything they are shown afterwards."""

    correct: bool
    kind: str
    picked: list[int] = field(default_factory=list)
    output: str | None = None
    choices: list[Feedback] = field(default_factory=list)
    expected_output: str | None = None
    device_answers: dict[str, str] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    explanation: str = ""

    @property
    def answer(self) -> Any:
        return self.picked if self.kind == "multiple_choice" else self.output

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "correct": self.correct,
            "kind": self.kind,
            "explanation": self.explanation,
        }
        if self.kind == "multiple_choice":
            data["picked"] = self.picked
            data["correct_choices"] = [c.index for c in self.choices if c.correct]
            data["choices"] = [vars(c) for c in self.choices]
        else:
            data["output"] = self.output
            data["expected_output"] = self.expected_output
            data["accepted"] = self.accepted
            data["device_answers"] = self.device_answers
        return data


def grade(
    loaded: LoadedQuestion, *, picked: list[int] | None = None, output: str | None = None
) -> GradedAnswer:
    """Grades one answer: the picked choices for a multiple-choice question, the predicted output
    for a predict-output one. Raises AnswerError when it cannot be an answer to this question."""
    q = loaded.question
    if isinstance(q, MultipleChoiceQuestion):
        if picked is None:
            raise AnswerError("This is a multiple-choice question: send the picked choices.")
        chosen = sorted(set(picked))
        bad = [i for i in chosen if not 0 <= i < len(q.choices)]
        if bad:
            raise AnswerError(f"Choice {bad[0]} does not exist (this question has {len(q.choices)}).")
        if not chosen:
            raise AnswerError("Pick an answer first.")
        feedback = [Feedback(i, c.text, c.why, c.correct, i in chosen) for i, c in enumerate(q.choices)]
        return GradedAnswer(
            grade_choices(q, set(chosen)), q.kind, picked=chosen, choices=feedback, explanation=q.explanation
        )
    assert isinstance(q, PredictOutputQuestion)
    if output is None:
        raise AnswerError("This question asks what the code prints: send the output.")
    return GradedAnswer(
        grade_output(q, output),
        q.kind,
        output=output,
        expected_output=normalise_output(q.answer),
        device_answers=dict(q.device_answers),
        accepted=[normalise_output(a) for a in q.accept],
        explanation=q.explanation,
    )


def regrade(loaded: LoadedQuestion, attempt: Attempt) -> GradedAnswer | None:
    """A stored attempt, shown again (None when the question changed kind since)."""
    value = attempt.answer_value
    try:
        if isinstance(loaded.question, MultipleChoiceQuestion) and isinstance(value, list):
            out = grade(loaded, picked=[int(v) for v in value])
        elif isinstance(loaded.question, PredictOutputQuestion) and isinstance(value, str):
            out = grade(loaded, output=value)
        else:
            return None
    except AnswerError:
        return None
    out.correct = attempt.correct  # as graded then
    return out
