"""Interview mode, the candidate's side: their page (`/interview/TOKEN`), stating a prediction,
running the code, moving on, and the extra time. The interviewer's live page and the report are
`app.web.routes.interviewer`'s; finding an interview by its link and recording its events,
`app.web.routes.interview_links`'. Making one is the studio's (`app.web.routes.studio.interviews`).

A candidate's run goes through `state.run_queue` like every learner's (same sandbox, limits, fair
queue). Each step is recorded as an event, which the interviewer's page receives live.

What may happen once is recorded under a key unique in the interview (`model.append`'s `once`),
so that of requests racing to do it (a double click, a script, two web processes) one does it:
opening question P ("opened:P", the start is P = 0), a prediction of it ("predicted:P"), moving
on from it ("next:P"), the end ("finished"), more time ("extended"), and the Nth run of question
P's code ("run:P:N", N up to `RUNS_PER_QUESTION`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from app.bank.load import LoadedQuestion
from app.bank.public import multiple_answers, title_of
from app.bank.schema import MultipleChoiceQuestion
from app.grading import AnswerError, describe_tolerance
from app.interview import entries, model, snippets
from app.interview.report import Progress, progress
from app.verify.key_checks import interview_proof
from app.verify.proofs import Proof
from app.web.deps import State
from app.web.errors import AppError, NotFound
from app.web.rendering.render import page
from app.web.routes.interview_links import by_candidate_token, events_of, record
from app.web.state import WebState

router = APIRouter(include_in_schema=False)


class NotYet(AppError):
    status = 409
    message = "State your prediction first: running the code shows the answer."


class TimeIsUp(AppError):
    status = 409
    message = "Time is up: what you did before it is with your interviewer."


RUNS_PER_QUESTION = 100
"""Runs of one question's code an interview keeps. Each is an event with its code (up to the
server's snippet limit) in the interview's log, read whole by every page of it: unbounded, a
candidate's loop grew the log, and each page, without end. A person tries a few variants."""


class RunsUsedUp(AppError):
    status = 429

    def __init__(self, runs: int) -> None:
        super().__init__(f"This question's code has been run {runs} times, the most one interview keeps: "
                         "go on from what those runs showed.")  # fmt: skip


LATE_GRACE = timedelta(seconds=15)
"""How long after the deadline a prediction or a run still counts: the one sent as the clock
ran out, on a slow network. Past it the server refuses them (the page's countdown is the
candidate's, and a script's, to ignore)."""


def _time_is_up(state: WebState, interview: model.Interview, done: Progress) -> bool:
    deadline = done.deadline(interview)
    return deadline is not None and state.clock() > deadline + LATE_GRACE


def _under_review(state: WebState, interview: model.Interview, question_id: str) -> bool:
    """A run here contradicts the question's key: no prediction of it can be graded, so the
    candidate may go past it unanswered (it was stuck there)."""
    loaded = snippets.resolve(state.bank, interview.snippets, question_id)
    return loaded is not None and _proof(state, interview, loaded).state == "held_back"


def _candidate_key(token: str) -> str:
    """Whose choice order a candidate sees: shuffled per interview, as per learner."""
    return f"interview:{token}"


def _question(state: WebState, interview: model.Interview, question_id: str) -> LoadedQuestion:
    found = snippets.resolve(state.bank, interview.snippets, question_id)
    if found is None:
        raise NotFound(f"The question {question_id!r} is no longer in the bank.")
    return found


def _proof(state: WebState, interview: model.Interview, loaded: LoadedQuestion) -> Proof:
    return interview_proof(state.proofs, state.live_bank.records, interview.snippets, loaded)


# ---- the candidate ---------------------------------------------------------------------------


async def _candidate_page(
    request: Request, state: WebState, token: str, status_code: int = 200, **extra: Any
) -> Response:
    interview = await by_candidate_token(state, token)
    done = progress(interview, await events_of(state, interview))
    context: dict[str, Any] = {
        "interview": interview,
        "token": token,
        "done": done,
        "count": len(done.questions),
    }
    current = done.current
    if current is not None and done.started_at is None:
        # Not started: a page that says what is coming, and a button that starts it. Opening the
        # link never starts the clock: link previews and mail scanners open links too.
        context.update(not_started=True, minutes=interview.minutes, **extra)
        return await page(
            state, request, "interview/candidate.html", status_code=status_code, **context
        )
    if current is not None:
        if current.opened_at is None:
            await record(
                request,
                state,
                interview,
                "opened",
                {"question": current.id, "index": done.position},
                once=f"opened:{done.position}",
            )
            done = progress(interview, await events_of(state, interview))
            current = done.current
        assert current is not None
        loaded = _question(state, interview, current.id)
        q = loaded.question
        proof = _proof(state, interview, loaded)
        context.update(
            current=current, loaded=loaded, q=q, title=title_of(loaded), proof=proof,
            order=state.answers.order(_candidate_key(token), loaded), confidences=model.CONFIDENCES,
            multiple=multiple_answers(q) if isinstance(q, MultipleChoiceQuestion) else False,
            tolerance_text=describe_tolerance(getattr(q, "tolerance", None)),
            code=extra.pop("code", None) or q.code or "",
        )  # fmt: skip
    deadline = done.deadline(interview)
    # Past it the server refuses predictions, runs and more time: the page offers none of them.
    time_up = TimeIsUp.message if _time_is_up(state, interview, done) else None
    # The countdown runs from what is left by the server's clock (not the candidate's, which may be
    # minutes off: the page would have said "time is up" early, or reloaded again and again).
    left_ms = round((deadline - state.clock()).total_seconds() * 1000) if deadline else None
    context.update(deadline=deadline.isoformat() if deadline else None, left_ms=left_ms,
                   grace_s=int(LATE_GRACE.total_seconds()), time_up=time_up, **extra)  # fmt: skip
    return await page(
        state, request, "interview/candidate.html", status_code=status_code, **context
    )


@router.get("/interview/{token}")
async def candidate_page(token: str, request: Request, state: State) -> Response:
    return await _candidate_page(request, state, token)


@router.post("/interview/{token}/start")
async def start(token: str, request: Request, state: State) -> Response:
    """The candidate pressed Start: the first question opens, and the time limit starts."""
    interview = await by_candidate_token(state, token)
    done = progress(interview, await events_of(state, interview))
    if done.current is not None and done.started_at is None:
        await record(
            request,
            state,
            interview,
            "opened",
            {"question": done.current.id, "index": done.position},
            once=f"opened:{done.position}",
        )
    return RedirectResponse(f"/interview/{token}", status_code=303)


@router.post("/interview/{token}/predict")
async def predict(
    token: str, request: Request, state: State,
    confidence: Annotated[int, Form()],
    choice: Annotated[list[int], Form()] = [],  # noqa: B006 (FastAPI copies defaults)
    output: Annotated[str | None, Form()] = None,  # its length is checked by `grade`, which keeps it
) -> Response:  # fmt: skip
    interview = await by_candidate_token(state, token)
    done = progress(interview, await events_of(state, interview))
    current = done.current
    if current is None or current.prediction is not None:
        return RedirectResponse(f"/interview/{token}", status_code=303)
    if _time_is_up(state, interview, done):
        return await _candidate_page(request, state, token, TimeIsUp.status, error=TimeIsUp.message)
    loaded = _question(state, interview, current.id)
    if (
        loaded.id not in interview.snippets
    ):  # a snippet's key was proved when the interview was made
        await state.ensure_gradeable_by_its_run(loaded)
    if current.opened_at is None:  # answered without the page (a script): the time starts now
        await record(
            request, state, interview, "opened", {"question": current.id},
            once=f"opened:{done.position}",
        )  # fmt: skip
    # Refused, the form comes back as it was sent (it came back empty, the clock running).
    said = {"confidence": confidence, "choice": choice, "output": output}
    proof = _proof(state, interview, loaded)
    try:
        predicted = state.answers.prediction(
            _candidate_key(token), loaded, proof, choice, output or "", confidence
        )
    except AnswerError as exc:
        return await _candidate_page(request, state, token, 400, error=str(exc), said=said)
    # One prediction a question: of several sent at once, the first stored is the one that counts.
    await record(
        request, state, interview, "predicted", predicted, once=f"predicted:{done.position}"
    )
    return RedirectResponse(f"/interview/{token}#result", status_code=303)


async def _run(
    request: Request, state: WebState, token: str, code: str
) -> tuple[dict[str, Any] | None, AppError | None]:
    interview = await by_candidate_token(state, token)
    done = progress(interview, await events_of(state, interview))
    current = done.current
    if current is None:
        raise NotFound("This interview is over.")
    if _time_is_up(state, interview, done):
        return None, TimeIsUp()
    if current.prediction is None:
        return None, NotYet()
    if len(current.runs) >= RUNS_PER_QUESTION:
        return None, RunsUsedUp(RUNS_PER_QUESTION)
    position = done.position
    run, refusal = await state.learner_run(request, code)
    if run is None:
        return None, refusal
    entry = entries.ran(_question(state, interview, current.id), code, run)
    if not await _keep_run(request, state, interview, position, entry):
        # Runs sent at once took the last places while this one ran: shown, it would be a run
        # the interviewer never sees.
        return None, RunsUsedUp(RUNS_PER_QUESTION)
    return run, None


async def _keep_run(
    request: Request,
    state: WebState,
    interview: model.Interview,
    position: int,
    entry: dict[str, Any],
) -> bool:
    """Stores a run of question `position` as its next, "run:P:N"; False once it has
    `RUNS_PER_QUESTION`. A number another request took meanwhile: the count is read again."""
    for _ in range(RUNS_PER_QUESTION + 1):
        done = progress(interview, await events_of(state, interview))
        runs = len(done.questions[position].runs)
        if runs >= RUNS_PER_QUESTION:
            return False
        if await record(request, state, interview, "run", entry, once=f"run:{position}:{runs + 1}"):
            return True
    return False


@router.post("/interview/{token}/run")
async def run_page(
    token: str, request: Request, state: State, code: Annotated[str, Form()] = ""
) -> Response:
    """Without JavaScript: the whole page again, with the result under the editor."""
    run, error = await _run(request, state, token, code)
    return await _candidate_page(
        request,
        state,
        token,
        error.status if error else 200,
        code=code,
        run=run,
        run_message=error.message if error else None,
    )


@router.post("/interview/{token}/run/panel")
async def run_panel(
    token: str, request: Request, state: State, code: Annotated[str, Form()] = ""
) -> Response:
    """What app.js asks for: only the result panel."""
    run, error = await _run(request, state, token, code)
    response = await page(
        state, request, "_run_panel.html", status_code=error.status if error else 200,
        run=run, run_message=error.message if error else None,
    )  # fmt: skip
    response.headers.update(error.headers if error else {})
    return response


@router.post("/interview/{token}/next")
async def next_question(token: str, request: Request, state: State) -> Response:
    interview = await by_candidate_token(state, token)
    done = progress(interview, await events_of(state, interview))
    if (
        done.current is not None
        and done.started_at is not None
        and _time_is_up(state, interview, done)
    ):
        # Nothing more can count: the candidate ends it, and the interviewer's log says so.
        await record(
            request,
            state,
            interview,
            "finished",
            {"question": done.current.id, "time_up": True},
            once="finished",
        )
    elif done.current is not None and (
        done.current.prediction is not None or _under_review(state, interview, done.current.id)
    ):
        # Requests sent at once all read the same position: one moves on from it.
        last = done.position + 1 >= len(done.questions)
        await record(
            request,
            state,
            interview,
            "finished" if last else "next",
            {"question": done.current.id},
            once="finished" if last else f"next:{done.position}",
        )
    return RedirectResponse(f"/interview/{token}", status_code=303)


@router.post("/interview/{token}/extend")
async def extend(token: str, request: Request, state: State) -> Response:
    """The accessibility option: half as much time again, once."""
    interview = await by_candidate_token(state, token)
    done = progress(interview, await events_of(state, interview))
    started = done.started_at is not None
    if (
        interview.minutes
        and started
        and not done.extra_s
        and not done.finished
        and not _time_is_up(state, interview, done)
    ):
        await record(
            request,
            state,
            interview,
            "extended",
            {"seconds": interview.minutes * 30},
            once="extended",
        )
    return RedirectResponse(f"/interview/{token}", status_code=303)
