"""What the pages and the API show, computed once from the bank, the store and the clock.

Both the HTML pages and the JSON API read these views, so a learner sees the same grading,
statuses and progress whichever they use. Public views never carry an answer key: the key,
the feedback and the explanation come only with an attempt's outcome.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app import review
from app.bank import Bank, LoadedQuestion, LoadedSet
from app.bank_schema import MultipleChoiceQuestion, PredictOutputQuestion
from app.grading import correct_choices, grade_choices, grade_output, normalise_output
from app.store import Attempt, LearnerData

_WORDS = {
    "amp": "AMP", "cpu": "CPU", "cuda": "CUDA", "gpu": "GPU", "api": "API", "fp16": "FP16", "fp32": "FP32",
    "bf16": "BF16", "tf32": "TF32", "nan": "NaN", "nans": "NaNs", "inf": "inf", "infs": "infs",
    "gradscaler": "GradScaler", "vs": "vs.", "fwd": "fwd", "bwd": "bwd", "mm": "mm", "bmm": "bmm",
}  # fmt: skip
_SEED = re.compile(r"^seed\d+$")


def title_of(loaded: LoadedQuestion) -> str:
    """The question's title, or else its id read as one ("amp-main-benefit" -> "AMP main benefit")."""
    if loaded.question.title:
        return loaded.question.title
    words = [_WORDS.get(w, w) for w in loaded.id.split("-") if not _SEED.match(w)] or [loaded.id]
    first = words[0]
    words[0] = first if first in _WORDS.values() else first[:1].upper() + first[1:]
    return " ".join(words)


_MD_NOISE = re.compile(r"[`*_>#]|\[([^\]]*)\]\([^)]*\)")


def excerpt(markdown_text: str, limit: int = 140) -> str:
    """The prompt's opening words as plain text, for lists."""
    flat = " ".join(markdown_text.split())
    flat = _MD_NOISE.sub(lambda m: m.group(1) or "", flat)
    return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def multiple_answers(question: MultipleChoiceQuestion) -> bool:
    """Checkboxes ("pick every right answer") rather than radio buttons."""
    return len(correct_choices(question)) > 1


def public_question(loaded: LoadedQuestion, status: str | None = None) -> dict[str, Any]:
    """A question as a learner may see it before answering: no key, no feedback, no explanation."""
    q = loaded.question
    data: dict[str, Any] = {
        "id": q.id,
        "set_id": loaded.set_id,
        "title": title_of(loaded),
        "kind": q.kind,
        "topic": q.topic,
        "difficulty": q.difficulty,
        "tags": list(q.tags),
        "prompt": q.prompt,
        "code": q.code,
        "requires": q.requires,
    }
    if isinstance(q, MultipleChoiceQuestion):
        data["choices"] = [{"index": i, "text": c.text} for i, c in enumerate(q.choices)]
        data["multiple"] = multiple_answers(q)
    if status is not None:
        data["status"] = status
    return data


# ---- grading ---------------------------------------------------------------------------------


class AnswerError(ValueError):
    """The submitted answer does not fit the question (a choice that does not exist, wrong kind)."""


@dataclass
class Feedback:
    index: int
    text: str
    why: str
    correct: bool
    picked: bool


@dataclass
class Outcome:
    """How an answer went, with everything the learner is shown afterwards."""

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
) -> Outcome:
    """Grades one answer; raises AnswerError when it cannot be an answer to this question."""
    q = loaded.question
    if isinstance(q, MultipleChoiceQuestion):
        if picked is None:
            raise AnswerError("this is a multiple-choice question: send the picked choices")
        chosen = sorted(set(picked))
        bad = [i for i in chosen if not 0 <= i < len(q.choices)]
        if bad:
            raise AnswerError(
                f"choice {bad[0]} does not exist (this question has {len(q.choices)})"
            )
        if not chosen:
            raise AnswerError("pick at least one choice")
        feedback = [
            Feedback(i, c.text, c.why, c.correct, i in chosen) for i, c in enumerate(q.choices)
        ]
        return Outcome(
            grade_choices(q, set(chosen)),
            q.kind,
            picked=chosen,
            choices=feedback,
            explanation=q.explanation,
        )
    assert isinstance(q, PredictOutputQuestion)
    if output is None:
        raise AnswerError("this question asks what the code prints: send the output")
    return Outcome(
        grade_output(q, output),
        q.kind,
        output=output,
        expected_output=normalise_output(q.answer),
        device_answers=dict(q.device_answers),
        accepted=[normalise_output(a) for a in q.accept],
        explanation=q.explanation,
    )


def regrade(loaded: LoadedQuestion, attempt: Attempt) -> Outcome | None:
    """The outcome of a stored attempt, shown again (None when the question changed kind since)."""
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


# ---- a learner's standing ----------------------------------------------------------------------


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
            self.last[a.question_id] = a

    def status(self, question_id: str) -> str:
        return review.status(self.last.get(question_id), self.data.cards.get(question_id), self.now)

    def summary(self, questions: list[LoadedQuestion]) -> dict[str, int]:
        counts = {"total": len(questions), "new": 0, "right": 0, "wrong": 0, "due": 0}
        for q in questions:
            counts[self.status(q.id)] += 1
        counts["answered"] = counts["total"] - counts["new"]
        return counts

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
                    "topic": topic,
                    "attempts": len(tries),
                    "right": right,
                    "accuracy": round(100 * right / len(tries)) if tries else None,
                    **self.summary(questions),
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
                    "exists": loaded is not None,
                    "topic": a.topic,
                    "correct": a.correct,
                    "answer": a.answer_value,
                    "at": a.when,
                }
            )
        return rows

    def queue(self) -> list[dict[str, Any]]:
        rows = []
        for item in review.queue(self.data.cards, self.now):
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
