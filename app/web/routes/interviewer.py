"""Interview mode, the interviewer's side: their live page (`/interviewer/TOKEN`), fed by
server-sent events, their notes, revoking the candidate's link, and the report (a page and
JSON). The candidate's side is `app.web.routes.interview`.

Each link is its own credential: the interviewer's token is looked up only among interviewer
tokens (`app.web.routes.interview_links`). The live channel is `app.interview.live`: stored first, then
fanned out; a reconnect with `Last-Event-ID` (EventSource sends it by itself) reads what it
missed from the database.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Form, Header, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from app.bank.public import title_of
from app.interview import model, snippets
from app.interview.entries import key_of
from app.interview.report import report
from app.web.deps import State
from app.web.errors import NotFound
from app.web.rendering.render import in_thread, page
from app.web.routes.interview_links import by_host_token, events_of, live_hub, record
from app.web.state import WebState

router = APIRouter(include_in_schema=False)


@router.get("/interviewer/{token}")
async def host_page(token: str, request: Request, state: State) -> Response:
    interview = await by_host_token(state, token)
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
    interview = await by_host_token(state, token)
    interview_id = interview.id
    assert interview_id is not None
    after = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
    hub = live_hub(request)

    async def stream() -> Any:
        yield "retry: 500\n\n"
        if replay:
            for stored in await in_thread(
                state, lambda: model.events(state.store, interview_id, after)
            ):
                yield _sse(stored)
            return
        async for event in hub.follow(state.store, interview_id, after):
            yield _sse(event)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


@router.post("/interviewer/{token}/notes")
async def notes(
    token: str, request: Request, state: State,
    question: Annotated[str, Form(max_length=80)], text: Annotated[str, Form(max_length=20_000)] = "",
) -> Response:  # fmt: skip
    interview = await by_host_token(state, token)
    if question not in interview.question_ids:
        raise NotFound("That question is not in this interview.")
    await record(request, state, interview, "note", {"question": question, "text": text})
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"ok": True})
    return RedirectResponse(f"/interviewer/{token}", status_code=303)


@router.post("/interviewer/{token}/revoke")
async def revoke(token: str, request: Request, state: State) -> Response:
    interview = await by_host_token(state, token)
    interview_id = interview.id
    assert interview_id is not None
    if await in_thread(state, lambda: model.revoke(state.store, interview_id, state.clock())):
        await record(request, state, interview, "revoked", {}, once="revoked")
    return RedirectResponse(f"/interviewer/{token}", status_code=303)


async def _report(state: WebState, interview: model.Interview) -> dict[str, Any]:
    titles: dict[str, str] = {}
    keys: dict[str, tuple[str, str]] = {}
    for qid in interview.question_ids:
        loaded = snippets.resolve(state.bank, interview.snippets, qid)
        titles[qid] = title_of(loaded) if loaded else qid
        if loaded is not None:  # shown for a question not predicted too (its truth was "—")
            keys[qid] = (loaded.question.kind, key_of(loaded))
    return report(interview, await events_of(state, interview), titles, state.clock(), keys)


@router.get("/interviewer/{token}/report")
async def report_page(token: str, request: Request, state: State) -> Response:
    interview = await by_host_token(state, token)
    return await page(
        state, request, "interview/report.html", token=token, r=await _report(state, interview)
    )


@router.get("/interviewer/{token}/report.json")
async def report_json(token: str, state: State) -> Response:
    return JSONResponse(await _report(state, await by_host_token(state, token)))
