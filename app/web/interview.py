"""Interview mode: the candidate's page (`/interview/TOKEN`), the interviewer's live page
(`/interviewer/TOKEN`, fed by server-sent events) and the report. Making one is the studio's
(`app.web.studio.interviews`).

Each link is its own credential: the candidate's token never opens an interviewer route (it is
looked up only among candidate tokens), and a revoked candidate link answers 404. A candidate's
run goes through `state.run_queue` like every learner's (same sandbox, limits, fair queue). The
live channel is `app.interview.live`: stored first, then fanned out; a reconnect with
`Last-Event-ID` (EventSource sends it by itself) reads what it missed from the database.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Form, Header, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from app.bank.load import LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion
from app.grading import LONGEST_PREDICTION, AnswerError, describe_tolerance, multiple_answers
from app.interview import entries, model, snippets
from app.interview.live import Hub
from app.interview.report import Progress, progress, report
from app.proofs import Proof
from app.public_question import title_of
from app.web.deps import State
from app.web.errors import AppError, NotFound
from app.web.render import in_thread, page
from app.web.state import WebState

router = APIRouter(include_in_schema=False)

GONE = "This interview link does not work: it is unknown, or it was revoked."


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


def _hub(request: Request) -> Hub:
    hub = getattr(request.app.state, "interview_hub", None)
    if hub is None:
        hub = request.app.state.interview_hub = Hub()
    return hub


async def _record(
    request: Request, state: WebState, interview: model.Interview, kind: str, data: dict[str, Any]
) -> None:
    assert interview.id is not None
    await _hub(request).record(state.store, interview.id, kind, data)


async def _candidate(state: WebState, token: str) -> model.Interview:
    found = await in_thread(state, lambda: model.by_candidate(state.store, token))
    if found is None:
        raise NotFound(GONE)
    return found


async def _host(state: WebState, token: str) -> model.Interview:
    found = await in_thread(state, lambda: model.by_host(state.store, token))
    if found is None:
        raise NotFound(GONE)
    return found


def _question(state: WebState, interview: model.Interview, question_id: str) -> LoadedQuestion:
    found = snippets.resolve(state.bank, interview.snippets, question_id)
    if found is None:
        raise NotFound(f"The question {question_id!r} is no longer in the bank.")
    return found


def _proof(state: WebState, interview: model.Interview, loaded: LoadedQuestion) -> Proof:
    if loaded.id in interview.snippets:
        return Proof("proved", [{"device": "", "result": "pass", "label": "ad-hoc snippet: its answer is what it printed when the interview was made"}])
    return state.proof(loaded)


async def _events(state: WebState, interview: model.Interview) -> list[model.Event]:
    """The interview's events, read in the page threads: like every database read here, never
    on the event loop, where a slow one would hold up every other request."""
    assert interview.id is not None
    return await in_thread(state, lambda: model.events(state.store, interview.id))


# ---- the candidate ---------------------------------------------------------------------------


async def _candidate_page(
    request: Request, state: WebState, token: str, status_code: int = 200, **extra: Any
) -> Response:
    interview = await _candidate(state, token)
    done = progress(interview, await _events(state, interview))
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
        return await page(state, request, "interview/candidate.html", status_code=status_code, **context)
    if current is not None:
        if current.opened_at is None:
            await _record(
                request,
                state,
                interview,
                "opened",
                {"question": current.id, "index": done.position},
            )
            done = progress(interview, await _events(state, interview))
            current = done.current
        assert current is not None
        loaded = _question(state, interview, current.id)
        q = loaded.question
        proof = _proof(state, interview, loaded)
        context.update(
            current=current, loaded=loaded, q=q, title=title_of(loaded), proof=proof,
            order=state.choice_order(_candidate_key(token), loaded), confidences=model.CONFIDENCES,
            multiple=multiple_answers(q) if isinstance(q, MultipleChoiceQuestion) else False,
            tolerance_text=describe_tolerance(getattr(q, "tolerance", None)),
            code=extra.pop("code", None) or q.code or "",
        )  # fmt: skip
    deadline = done.deadline(interview)
    # Past it the server refuses predictions, runs and more time: the page offers none of them.
    time_up = TimeIsUp.message if _time_is_up(state, interview, done) else None
    context.update(deadline=deadline.isoformat() if deadline else None, time_up=time_up, **extra)
    return await page(
        state, request, "interview/candidate.html", status_code=status_code, **context
    )


@router.get("/interview/{token}")
async def candidate_page(token: str, request: Request, state: State) -> Response:
    return await _candidate_page(request, state, token)


@router.post("/interview/{token}/start")
async def start(token: str, request: Request, state: State) -> Response:
    """The candidate pressed Start: the first question opens, and the time limit starts."""
    interview = await _candidate(state, token)
    done = progress(interview, await _events(state, interview))
    if done.current is not None and done.started_at is None:
        await _record(request, state, interview, "opened", {"question": done.current.id, "index": done.position})
    return RedirectResponse(f"/interview/{token}", status_code=303)


@router.post("/interview/{token}/predict")
async def predict(
    token: str, request: Request, state: State,
    confidence: Annotated[int, Form()],
    choice: Annotated[list[int], Form()] = [],  # noqa: B006 (FastAPI copies defaults)
    output: Annotated[str | None, Form(max_length=LONGEST_PREDICTION)] = None,
) -> Response:  # fmt: skip
    interview = await _candidate(state, token)
    done = progress(interview, await _events(state, interview))
    current = done.current
    if current is None or current.prediction is not None:
        return RedirectResponse(f"/interview/{token}", status_code=303)
    if _time_is_up(state, interview, done):
        return await _candidate_page(request, state, token, TimeIsUp.status, error=TimeIsUp.message)
    loaded = _question(state, interview, current.id)
    if loaded.id not in interview.snippets:  # a snippet's key was proved when the interview was made
        state.ensure_gradeable(loaded)
    if current.opened_at is None:  # answered without the page (a script): the time starts now
        await _record(request, state, interview, "opened", {"question": current.id})
    # Refused, the form comes back as it was sent (it came back empty, the clock running).
    said = {"confidence": confidence, "choice": choice, "output": output}
    if confidence not in model.CONFIDENCES:
        return await _candidate_page(
            request, state, token, 400, error="Say how sure you are: 50, 75 or 95 %.", said=said
        )
    try:
        graded = state.grade(_candidate_key(token), loaded, choice, output or "")
    except AnswerError as exc:
        return await _candidate_page(request, state, token, 400, error=str(exc), said=said)
    await _record(
        request, state, interview, "predicted", entries.predicted(loaded, graded, confidence)
    )
    return RedirectResponse(f"/interview/{token}#result", status_code=303)


async def _run(
    request: Request, state: WebState, token: str, code: str
) -> tuple[dict[str, Any] | None, AppError | None]:
    interview = await _candidate(state, token)
    done = progress(interview, await _events(state, interview))
    current = done.current
    if current is None:
        raise NotFound("This interview is over.")
    if _time_is_up(state, interview, done):
        return None, TimeIsUp()
    if current.prediction is None:
        return None, NotYet()
    if len(current.runs) >= RUNS_PER_QUESTION:
        return None, RunsUsedUp(RUNS_PER_QUESTION)
    run, refusal = await state.learner_run(request, code)
    if run is None:
        return None, refusal
    await _record(
        request, state, interview, "run", entries.ran(_question(state, interview, current.id), code, run)
    )
    return run, None


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
    interview = await _candidate(state, token)
    done = progress(interview, await _events(state, interview))
    if done.current is not None and done.started_at is not None and _time_is_up(state, interview, done):
        # Nothing more can count: the candidate ends it, and the interviewer's log says so.
        await _record(request, state, interview, "finished", {"question": done.current.id, "time_up": True})
    elif done.current is not None and (done.current.prediction is not None or _under_review(state, interview, done.current.id)):
        last = done.position + 1 >= len(done.questions)
        await _record(
            request, state, interview, "finished" if last else "next", {"question": done.current.id}
        )
    return RedirectResponse(f"/interview/{token}", status_code=303)


@router.post("/interview/{token}/extend")
async def extend(token: str, request: Request, state: State) -> Response:
    """The accessibility option: half as much time again, once."""
    interview = await _candidate(state, token)
    done = progress(interview, await _events(state, interview))
    started = done.started_at is not None
    if interview.minutes and started and not done.extra_s and not done.finished and not _time_is_up(state, interview, done):
        await _record(request, state, interview, "extended", {"seconds": interview.minutes * 30})
    return RedirectResponse(f"/interview/{token}", status_code=303)


# ---- the interviewer ---------------------------------------------------------------------------


@router.get("/interviewer/{token}")
async def host_page(token: str, request: Request, state: State) -> Response:
    interview = await _host(state, token)
    questions = []
    for qid in interview.question_ids:
        loaded = snippets.resolve(state.bank, interview.snippets, qid)
        questions.append(
            {
                "id": qid,
                "title": title_of(loaded) if loaded else qid,
                "q": loaded.question if loaded else None,
            }
        )
    base = str(request.base_url).rstrip("/")
    return await page(
        state, request, "interview/host.html", interview=interview, token=token, questions=questions,
        candidate_url=f"{base}/interview/{interview.candidate_token}", host_url=f"{base}/interviewer/{token}",
    )  # fmt: skip


def _sse(event: model.Event | None) -> str:
    if event is None:
        return ": ping\n\n"
    return f"id: {event.id}\ndata: {json.dumps(event.to_dict())}\n\n"


@router.get("/interviewer/{token}/events")
async def host_events(
    token: str, request: Request, state: State,
    last_event_id: Annotated[str | None, Header()] = None, replay: bool = False,
) -> Response:  # fmt: skip
    """Server-sent events: everything after `Last-Event-ID` (all of it on a first connect), then
    each event as it is stored. `?replay=true` sends what is stored and ends."""
    interview = await _host(state, token)
    assert interview.id is not None
    after = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
    hub = _hub(request)

    async def stream() -> Any:
        yield "retry: 500\n\n"
        if replay:
            for event in await in_thread(state, lambda: model.events(state.store, interview.id, after)):  # type: ignore[arg-type]
                yield _sse(event)
            return
        async for event in hub.follow(state.store, interview.id, after):  # type: ignore[arg-type]
            yield _sse(event)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


@router.post("/interviewer/{token}/notes")
async def notes(
    token: str, request: Request, state: State,
    question: Annotated[str, Form(max_length=80)], text: Annotated[str, Form(max_length=20_000)] = "",
) -> Response:  # fmt: skip
    interview = await _host(state, token)
    if question not in interview.question_ids:
        raise NotFound("That question is not in this interview.")
    await _record(request, state, interview, "note", {"question": question, "text": text})
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"ok": True})
    return RedirectResponse(f"/interviewer/{token}", status_code=303)


@router.post("/interviewer/{token}/revoke")
async def revoke(token: str, request: Request, state: State) -> Response:
    interview = await _host(state, token)
    assert interview.id is not None
    if await in_thread(state, lambda: model.revoke(state.store, interview.id, state.clock())):
        await _record(request, state, interview, "revoked", {})
    return RedirectResponse(f"/interviewer/{token}", status_code=303)


async def _report(state: WebState, interview: model.Interview) -> dict[str, Any]:
    titles = {}
    for qid in interview.question_ids:
        loaded = snippets.resolve(state.bank, interview.snippets, qid)
        titles[qid] = title_of(loaded) if loaded else qid
    return report(interview, await _events(state, interview), titles, state.clock())


@router.get("/interviewer/{token}/report")
async def report_page(token: str, request: Request, state: State) -> Response:
    interview = await _host(state, token)
    return await page(
        state, request, "interview/report.html", token=token, r=await _report(state, interview)
    )


@router.get("/interviewer/{token}/report.json")
async def report_json(token: str, state: State) -> Response:
    return JSONResponse(await _report(state, await _host(state, token)))
