"""What a candidate's prediction and run become in the interview's log: the payloads of the
`predicted` and `run` events, in plain data the interviewer's page and the report read as is."""

from __future__ import annotations

import difflib
from typing import Any

from app.bank.load import LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion
from app.explain_text import what_happened
from app.grading import GradedAnswer, normalise_output

STDOUT_CHARS = 4000
"""Output kept per run in the log (the run itself is capped by the sandbox)."""


def key_of(loaded: LoadedQuestion) -> str:
    """A question's key as the interviewer reads it: the right choices' words, or the output."""
    q = loaded.question
    if isinstance(q, MultipleChoiceQuestion):
        return " / ".join(c.text for c in q.choices if c.correct)
    return normalise_output(getattr(q, "answer", "") or "")


def predicted(
    loaded: LoadedQuestion, graded: GradedAnswer, confidence: int, *, authors_word: bool = False
) -> dict[str, Any]:
    """The `predicted` event's data. `authors_word`: the key was graded on the author's word alone
    (no run on the device it asks about proved it), said wherever the verdict is shown."""
    q = loaded.question
    answer: str | None
    if isinstance(q, MultipleChoiceQuestion):
        answer = " / ".join(q.choices[i].text for i in graded.picked)
    else:
        answer = graded.output
    truth = key_of(loaded)
    return {
        "question": loaded.id,
        "kind": q.kind,  # a choice's words are Markdown; an output is shown as printed
        "answer": answer,
        "confidence": confidence,
        "correct": graded.correct,
        "truth": truth,
        **({"authors_word": True} if authors_word else {}),
    }


def ran(loaded: LoadedQuestion, code: str, run: dict[str, Any]) -> dict[str, Any]:
    """A run: the code as a diff against the question's, what it printed, and the explanation's
    summary sentences."""
    original = (loaded.question.code or "").splitlines()
    diff = "\n".join(
        difflib.unified_diff(original, code.splitlines(), "question", "candidate", lineterm="")
    )
    exc = run.get("exception") or {}
    error = (
        f"{exc.get('type', '')}: {exc.get('message', '')}" if exc else (run.get("message") or "")
    )
    return {
        "question": loaded.id, "code": code, "diff": diff, "status": run.get("status"),
        "stdout": (run.get("stdout") or "")[:STDOUT_CHARS], "error": error,
        "summary": what_happened(run)[:8], "duration_ms": run.get("duration_ms"),
    }  # fmt: skip
