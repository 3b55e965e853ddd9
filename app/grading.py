"""Is a learner's answer right? Pure functions over bank questions; no web, no database."""

from __future__ import annotations

from app.bank_schema import MultipleChoiceQuestion, PredictOutputQuestion


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
