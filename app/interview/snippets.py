"""Ad-hoc snippets in an interview: code an interviewer writes for this candidate, not from the
bank, and the question each becomes. Its key is proved the only way ampquiz proves keys, in
`app.verify.key_checks` (`snippet_key`): the snippet is run when the interview is made, and what it
printed is the answer (a snippet that raises, runs out of time or prints something else when run
again is refused)."""

from __future__ import annotations

from typing import Any

from app.bank.load import Bank, LoadedQuestion
from app.bank.schema import PredictOutputQuestion

SET_ID = "interview"


def split_snippets(text: str) -> list[str]:
    """Snippets written one after another, separated by a line that is just `---`."""
    parts: list[str] = []
    current: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.strip() == "---":
            parts.append("\n".join(current))
            current = []
        else:
            current.append(line)
    parts.append("\n".join(current))
    return [p.strip("\n") + "\n" for p in parts if p.strip()]


def snippet_question(
    n: int, code: str, printed: str, environment: dict[str, Any], by: str
) -> dict[str, Any]:
    """Snippet `n`'s question: predict what it prints; the key is what it printed."""
    where = f"{'CUDA' if environment.get('device_kind') == 'cuda' else 'CPU'}, torch {environment.get('torch_version', '?')}"
    question = PredictOutputQuestion.model_validate({
        "id": f"snippet-{n}", "kind": "predict_output", "title": f"Snippet {n}", "topic": "ad-hoc", "difficulty": 2,
        "prompt": "What does this print?", "code": code, "requires": "cpu" if environment.get("device_kind") != "cuda" else "any",
        "answer": printed, "explanation": f"An ad-hoc snippet: the answer is what it printed when the interview was made ({where}).",
        "source": f"ad-hoc snippet by {by}",
    })  # fmt: skip
    return question.model_dump(mode="json", exclude_none=True)


def resolve(
    bank: Bank, snippets: dict[str, dict[str, Any]], question_id: str
) -> LoadedQuestion | None:
    """An interview's question: an ad-hoc snippet's own, else the bank's (None when it has gone)."""
    data = snippets.get(question_id)
    if data is None:
        return bank.question(question_id)
    return LoadedQuestion(SET_ID, PredictOutputQuestion.model_validate(data), SET_ID, 1)
