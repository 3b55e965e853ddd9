"""What a learner may see of a question before answering: its title, an excerpt, and its public
fields. Never the key, the feedback or the explanation: those come only with a graded answer."""

from __future__ import annotations

import hashlib
import hmac
import random
import re
from typing import Any

from app.bank.load import LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion

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


def public_question(
    loaded: LoadedQuestion,
    status: str | None = None,
    *,
    order: list[int] | None = None,
    proof: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A question as a learner may see it before answering: no key, no feedback, no explanation.
    Choices come in the learner's own `order` (`choice_order`), each with its position there
    (`index`), which is what an answer sends back: never its place in the YAML, which would say
    where the bank wrote the right one."""
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
        "asks_about": q.asks_about,
    }
    if isinstance(q, MultipleChoiceQuestion):
        shown = order if order is not None else range(len(q.choices))
        data["choices"] = [
            {"index": position, "text": q.choices[i].text} for position, i in enumerate(shown)
        ]
        data["multiple"] = multiple_answers(q)
    if status is not None:
        data["status"] = status
    if proof is not None:
        data["proof"] = proof
    return data


def correct_choices(question: MultipleChoiceQuestion) -> set[int]:
    """The places of the right choices in the YAML file."""
    return {i for i, choice in enumerate(question.choices) if choice.correct}


def multiple_answers(question: MultipleChoiceQuestion) -> bool:
    """Checkboxes ("pick every right answer") rather than radio buttons."""
    return len(correct_choices(question)) > 1


def choice_order(question: MultipleChoiceQuestion, learner: str, secret: str) -> list[int]:
    """The order a learner sees the choices in (their identities, places in the YAML): stable for
    one learner and question, different between learners, as written when the question opts out.
    Drawn with the server's secret, so that no one can work it out from their own learner id (or
    an interview's token) and the code: a form or an API answer sends back positions in this
    order (`picked_at`), which then say nothing of where the bank wrote the right choice."""
    order = list(range(len(question.choices)))
    if question.shuffle:
        seed = hmac.new(
            secret.encode(), f"{learner}\0{question.id}".encode(), hashlib.sha256
        ).digest()
        random.Random(seed).shuffle(order)
    return order


def picked_at(positions: list[int] | None, order: list[int] | None) -> list[int] | None:
    """The choices (by identity) a learner picked at `positions` of their `order`. A position
    outside it is passed on as it is: `grade` says that there is no such choice."""
    if positions is None or order is None:
        return positions
    return [order[p] if 0 <= p < len(order) else p for p in positions]
