"""The HTML pages: home, a set, a question (answer and result), the playground, progress.

Every page works without JavaScript: answering is a form POST that redirects to the result
(so a reload never answers twice), and the playground's Run is a form too. app/static/app.js
only makes things quicker (running without a reload, Ctrl/Cmd+Enter, tab indentation).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from app.bank_schema import MultipleChoiceQuestion
from app.runner import QueueFull
from app.web_errors import AppError, NotFound, SandboxDown, TooManyRuns
from app.web_state import WebState, learner_id, web_state
from app.web_views import AnswerError, excerpt, grade, multiple_answers, regrade, title_of
from sandbox import SandboxError

router = APIRouter(include_in_schema=False)

State = Annotated[WebState, Depends(web_state)]
Learner = Annotated[str, Depends(learner_id)]

DEFAULT_SNIPPET = """\
import torch

layer = torch.nn.Linear(4, 2)
x = torch.ones(1, 4)
with torch.autocast("cpu", dtype=torch.bfloat16):
    y = layer(x)
    loss = y.float().pow(2).mean()
print(y.dtype, loss.dtype)
"""


def _page(
    state: WebState, request: Request, name: str, status_code: int = 200, **context: Any
) -> Response:
    env = state.runner.environment
    context.setdefault("environment", env)
    return state.templates.TemplateResponse(request, name, context, status_code=status_code)


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
    return _page(
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
    return _page(
        state,
        request,
        "set.html",
        s=loaded_set,
        rows=rows,
        summary=standing.set_summary(loaded_set),
    )


def _question_context(state: WebState, learner: str, question_id: str) -> dict[str, Any]:
    loaded = state.question(question_id)
    bank = state.bank
    loaded_set = bank.set(loaded.set_id)
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
        "status": state.status(learner, loaded.id),
        "verification": state.verification_labels(loaded),
        "multiple": multiple_answers(q) if isinstance(q, MultipleChoiceQuestion) else False,
        "needs_cuda": q.requires == "cuda" and not state.runner.has_cuda,
    }


@router.get("/questions/{question_id}")
async def question_page(
    question_id: str,
    request: Request,
    state: State,
    learner: Learner,
    attempt: Annotated[int | None, Query()] = None,
) -> Response:
    context = _question_context(state, learner, question_id)
    loaded = context["loaded"]
    shown = state.store.attempt(learner, attempt) if attempt is not None else None
    if shown is not None and shown.question_id == loaded.id:
        outcome = regrade(loaded, shown)
        run, run_message = await state.question_run(loaded)
        context.update(outcome=outcome, attempt=shown, run=run, run_message=run_message)
    else:
        state.prefetch(loaded)
    return _page(state, request, "question.html", **context)


@router.post("/questions/{question_id}")
async def answer_form(
    question_id: str,
    request: Request,
    state: State,
    learner: Learner,
    choice: Annotated[list[int], Form()] = [],  # noqa: B006 (FastAPI copies defaults)
    output: Annotated[str | None, Form(max_length=10_000)] = None,
) -> Response:
    loaded = state.question(question_id)
    try:
        if isinstance(loaded.question, MultipleChoiceQuestion):
            outcome = grade(loaded, picked=choice)
        else:
            outcome = grade(loaded, output=output or "")
    except AnswerError as exc:
        context = _question_context(state, learner, question_id)
        message = "Pick an answer first." if not choice else str(exc).capitalize() + "."
        return _page(state, request, "question.html", status_code=400, error=message, **context)
    state.prefetch(loaded)
    saved = state.record(learner, loaded, outcome)
    url = request.url_for("question_page", question_id=loaded.id).include_query_params(
        attempt=saved.id
    )
    return RedirectResponse(f"{url.path}?{url.query}#result", status_code=303)


# ---- playground ----------------------------------------------------------------------------------


@router.get("/run")
async def playground(
    request: Request, state: State, q: Annotated[str | None, Query(max_length=80)] = None
) -> Response:
    code, source = DEFAULT_SNIPPET, None
    if q:
        source = state.question(q)
        code = source.question.code or DEFAULT_SNIPPET
    return _page(
        state, request, "playground.html", code=code, source=source, explain=True, run=None
    )


async def _run(
    state: WebState, code: str, explain: bool
) -> tuple[dict[str, Any] | None, AppError | None]:
    """Runs playground code; a refusal (too long, too busy) is returned to show on the page."""
    too_long = state.code_too_long(code)
    if too_long is not None:
        return None, too_long
    try:
        result = await state.runner.run(code, explain=explain)
    except QueueFull as exc:
        return None, TooManyRuns(exc.retry_after_s)
    except SandboxError:
        return None, SandboxDown()
    return result.to_dict(), None


@router.post("/run")
async def playground_run(
    request: Request,
    state: State,
    code: Annotated[str, Form()] = "",
    explain: Annotated[bool, Form()] = False,
    source: Annotated[str | None, Form(max_length=80)] = None,
) -> Response:
    """The no-JavaScript Run: the whole page again, with the result under the editor."""
    run, error = await _run(state, code, explain)
    loaded = state.bank.question(source) if source else None
    response = _page(
        state, request, "playground.html", status_code=error.status if error else 200, code=code,
        source=loaded, explain=explain, run=run, run_message=error.message if error else None,
    )  # fmt: skip
    response.headers.update(error.headers if error else {})
    return response


@router.post("/run/panel")
async def playground_panel(
    request: Request,
    state: State,
    code: Annotated[str, Form()] = "",
    explain: Annotated[bool, Form()] = False,
) -> Response:
    """What app.js asks for: only the result panel, rendered by the same template as the page."""
    run, error = await _run(state, code, explain)
    response = _page(
        state, request, "_run_panel.html", status_code=error.status if error else 200,
        run=run, run_message=error.message if error else None,
    )  # fmt: skip
    response.headers.update(error.headers if error else {})
    return response


@router.get("/progress")
async def progress_page(request: Request, state: State, learner: Learner) -> Response:
    standing = state.standing(learner)
    attempts = standing.data.attempts
    totals = {
        "attempts": len(attempts),
        "right": sum(1 for a in attempts if a.correct),
        "answered": len(standing.last),
        "questions": len(state.bank.questions),
    }
    queue = standing.queue()
    return _page(
        state, request, "progress.html",
        topics=standing.topics(), history=standing.history(), queue=queue,
        due=[r for r in queue if r["is_due"]], later=[r for r in queue if not r["is_due"]], totals=totals,
    )  # fmt: skip
