"""The learner's HTML pages: home, a set, a question (answer and result), progress.

Every page works without JavaScript: answering is a form POST that redirects to the result
(so a reload never answers twice). The playground has its own module, `app.web.playground`.
To add a page: a route here (or a module of its own, included in `app.web.factory`) and a
template in `app/web/templates/`.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from app.bank.load import LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion
from app.grading import AnswerError, describe_tolerance, grade, multiple_answers, regrade
from app.public_question import excerpt, title_of
from app.web.deps import Learner, State
from app.web.errors import NotFound
from app.web.render import page
from app.web.review_session import left_in_session
from app.web.state import WebState
from app.web.what_if import what_if_for  # "What if…" cards (app.mutate)

router = APIRouter(include_in_schema=False)

@router.get("/")
async def home(request: Request, state: State, learner: Learner) -> Response:
    bank = state.bank
    standing = state.standing(learner)
    sets = [
        {
            "set": s,
            "summary": standing.set_summary(s),
            "topics": sorted({q.question.topic for q in s.questions}),
        }
        for s in bank.sets
    ]
    due = sum(1 for row in standing.queue() if row["is_due"])
    return await page(
        state, request, "home.html", sets=sets, topics=standing.topics(), due=due, bank=bank
    )


@router.get("/sets/{set_id}")
async def set_page(set_id: str, request: Request, state: State, learner: Learner) -> Response:
    loaded_set = state.bank.set(set_id)
    if loaded_set is None:
        raise NotFound(f"There is no question set {set_id!r}.")
    standing = state.standing(learner)
    rows = [
        {
            "q": q,
            "title": title_of(q),
            "excerpt": excerpt(q.question.prompt),
            "status": standing.status(q.id),
        }
        for q in loaded_set.questions
    ]
    return await page(
        state,
        request,
        "set.html",
        s=loaded_set,
        rows=rows,
        summary=standing.set_summary(loaded_set),
    )


def _question_context(state: WebState, learner: str, question_id: str) -> dict[str, Any]:
    return question_context(state, learner, state.question(question_id))


def question_context(state: WebState, learner: str, loaded: LoadedQuestion) -> dict[str, Any]:
    """What question.html shows of a question to a learner (the studio's preview uses it too, for
    a question not in the bank yet: then it stands alone, without its set)."""
    loaded_set = state.bank.set(loaded.set_id) if state.bank.question(loaded.id) is loaded else None
    siblings = loaded_set.questions if loaded_set else [loaded]
    index = next((i for i, q in enumerate(siblings) if q.id == loaded.id), 0)
    q = loaded.question
    return {
        "loaded": loaded,
        "q": q,
        "title": title_of(loaded),
        "s": loaded_set,
        "position": index + 1,
        "count": len(siblings),
        "prev": siblings[index - 1] if index > 0 else None,
        "next": siblings[index + 1] if index + 1 < len(siblings) else None,
        "status": state.status(learner, loaded),
        "proof": (proof := state.proof(loaded)),
        "verification": proof.badges,
        "multiple": multiple_answers(q) if isinstance(q, MultipleChoiceQuestion) else False,
        "order": state.choice_order(learner, loaded),
        "submit_id": secrets.token_urlsafe(16),
        "shown_at": f"{state.clock().timestamp():.3f}",
        "tolerance_text": describe_tolerance(getattr(q, "tolerance", None)),
        "needs_cuda": q.requires == "cuda" and not state.run_queue.has_cuda,
    }


@router.get("/questions/{question_id}")
async def question_page(
    question_id: str,
    request: Request,
    state: State,
    learner: Learner,
    attempt: Annotated[int | None, Query()] = None,
    review: Annotated[str | None, Query(pattern=r"^\d{1,12}$")] = None,
) -> Response:
    context = _question_context(state, learner, question_id)
    if review is not None:
        context.update(review_since=review, review_left=left_in_session(state, learner))
    loaded = context["loaded"]
    if attempt is not None and not 1 <= attempt < 2**63:
        raise NotFound("There is no such attempt.")
    shown = state.store.attempt(learner, attempt) if attempt is not None else None
    if shown is not None and shown.question_id == loaded.id:
        graded = regrade(loaded, shown, context["order"])
        run, run_message = await state.question_run(loaded)
        context.update(outcome=graded, attempt=shown, run=run, run_message=run_message)
        context.update(what_if=what_if_for(request, state, loaded))  # recorded mutants, never run here
    else:
        state.question_runs.prefetch(loaded)
    return await page(state, request, "question.html", **context)


@router.post("/questions/{question_id}")
async def answer_form(
    question_id: str,
    request: Request,
    state: State,
    learner: Learner,
    choice: Annotated[list[int], Form()] = [],  # noqa: B006 (FastAPI copies defaults)
    output: Annotated[str | None, Form(max_length=10_000)] = None,
    submit_id: Annotated[str | None, Form(max_length=64)] = None,
    shown_at: Annotated[float | None, Form()] = None,
    review: Annotated[str | None, Form(pattern=r"^\d{1,12}$")] = None,
) -> Response:
    loaded = state.question(question_id)
    state.ensure_gradeable(loaded)
    try:
        graded = grade(loaded, picked=choice, output=output or "", order=state.choice_order(learner, loaded))
    except AnswerError as exc:
        context = _question_context(state, learner, question_id)
        return await page(state, request, "question.html", status_code=400, error=str(exc), **context)
    state.question_runs.prefetch(loaded)
    elapsed = None if shown_at is None else min(3600.0, max(0.0, state.clock().timestamp() - shown_at))
    saved, _is_new = state.record(learner, loaded, graded, submit_id or None, elapsed)
    params: dict[str, Any] = {"attempt": saved.id, **({"review": review} if review else {})}
    url = request.url_for("question_page", question_id=loaded.id).include_query_params(**params)
    return RedirectResponse(f"{url.path}?{url.query}#result", status_code=303)


@router.get("/progress")
async def progress_page(request: Request, state: State, learner: Learner) -> Response:
    standing = state.standing(learner)
    totals = standing.totals()
    queue = standing.queue()
    return await page(
        state, request, "progress.html",
        topics=standing.topics(), history=standing.history(), queue=queue,
        due=[r for r in queue if r["is_due"]], later=[r for r in queue if not r["is_due"]], totals=totals,
    )  # fmt: skip
