"""Distractors proved by running, in the editor: "Mistakes as choices" applies each classic AMP
mistake to the picked question's code as it stands in the editor (`app.mutate`), runs the
original and every mutant through the same run queue as "Run it", and lists one wrong choice per
distinct outcome (the same text and `why` as `ampquiz mutate --as-choices`); "Add as choice"
appends one to the question's `choices:` with the YAML round trip that keeps comments
(`app.bank.edit.add_choice`). Nothing is saved until the author saves."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from pydantic import Field

from app.bank import edit
from app.mutate.apply import mutants_of
from app.mutate.run import distractors, report_of
from app.web.deps import State
from app.web.errors import RUN_REFUSED, AppError, NotFound, run_refusal
from app.web.routes.studio.auth import Instructor
from app.web.routes.studio.editor import question_from_text

router = APIRouter(prefix="/studio", include_in_schema=False)
RUNS_AT_ONCE = 2
"""An instructor's runs in the queue at once, at most: never more than one learner's share
(AMPQUIZ_RUN_PER_LEARNER), so the mutants are not refused for asking all at once."""


@router.post("/api/distractors")
async def proved_distractors(request: Request, state: State, who: Instructor, name: Annotated[str, Body()],
                             text: Annotated[str, Body()], question_id: Annotated[str, Body()]) -> Any:  # fmt: skip
    q = question_from_text(state, name, text, question_id)
    code = q.question.code
    if not code:
        raise AppError("That question has no code to apply the mistakes to.")
    mutants = mutants_of(code)
    can_add = isinstance(getattr(q.question, "choices", None), list)
    if not mutants:
        return {"choices": [], "mutants": 0, "can_add": can_add}
    device = "cuda" if q.question.requires == "cuda" else None
    gate = asyncio.Semaphore(max(1, min(RUNS_AT_ONCE, state.settings.run_per_learner)))

    async def run(snippet: str, explain: bool) -> Any:
        async with gate:
            return await state.run_queue.run(
                snippet, explain=explain, device=device, owners=state.owners(request)
            )

    try:
        original, again, *runs = await asyncio.gather(
            run(code, True), run(code, False), *(run(m.code, True) for m in mutants)
        )
    except RUN_REFUSED as exc:
        raise run_refusal(exc) from None
    if original.status == "unavailable":
        raise AppError(original.message or "This code cannot run on this server.")
    report = report_of(code, original, again, mutants, runs)
    found = [
        {"rule": m.mutant.rule.name, "diff": m.mutant.diff, **choice}
        for m, choice in distractors(report)
    ]
    return {"choices": found, "mutants": len(mutants), "can_add": can_add}


@router.post("/api/add-choice")
async def add_choice(who: Instructor, text: Annotated[str, Body()], question_id: Annotated[str, Body()],
                     choice_text: Annotated[str, Body(max_length=2000)], why: Annotated[str, Body(max_length=4000)],
                     outcome: Annotated[dict[str, Annotated[str, Field(max_length=20_000)]] | None, Body()] = None) -> Any:  # fmt: skip
    unknown = set(outcome or {}) - {"raises", "message", "stdout"}
    if unknown:
        raise AppError(f"A choice's outcome says raises, message or stdout, not {min(unknown)!r}.")
    try:
        return {"text": edit.add_choice(text, question_id, choice_text, why, outcome)}
    except KeyError:
        raise NotFound(f"The file has no question {question_id!r}.") from None
    except ValueError:
        raise AppError("Only a multiple-choice question has choices to add to.") from None
