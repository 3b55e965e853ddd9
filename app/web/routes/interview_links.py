"""An interview as its links reach it: found by the candidate's token or the interviewer's (each
looked up only among its own kind, so one never opens the other's routes), its events read, and
new ones recorded and fanned out to the interviewer's live page (`app.interview.live`). The
candidate's routes (`app.web.routes.interview`) and the interviewer's (`app.web.routes.interviewer`) share it.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from app.interview import model
from app.interview.live import Hub
from app.web.errors import NotFound
from app.web.rendering.render import in_thread
from app.web.state import WebState

GONE = "This interview link does not work: it is unknown, or it was revoked."


def live_hub(request: Request) -> Hub:
    """The app's live channel for interviews, made on first use (one per app)."""
    hub = getattr(request.app.state, "interview_hub", None)
    if hub is None:
        hub = request.app.state.interview_hub = Hub()
    return hub


async def record(
    request: Request,
    state: WebState,
    interview: model.Interview,
    kind: str,
    data: dict[str, Any],
    *,
    once: str | None = None,
) -> bool:
    """Stores an event of the interview, then sends it to its interviewer's live page. `once`:
    the key of what may happen once (`model.append`); False when it had happened already (this
    request lost a race: nothing is stored)."""
    assert interview.id is not None
    return (
        await live_hub(request).record(state.store, interview.id, kind, data, once=once) is not None
    )


async def by_candidate_token(state: WebState, token: str) -> model.Interview:
    found = await in_thread(state, lambda: model.by_candidate(state.store, token))
    if found is None:
        raise NotFound(GONE)
    return found


async def by_host_token(state: WebState, token: str) -> model.Interview:
    found = await in_thread(state, lambda: model.by_host(state.store, token))
    if found is None:
        raise NotFound(GONE)
    return found


async def events_of(state: WebState, interview: model.Interview) -> list[model.Event]:
    """The interview's events, read in the page threads: like every database read here, never
    on the event loop, where a slow one would hold up every other request."""
    interview_id = interview.id
    assert interview_id is not None
    return await in_thread(state, lambda: model.events(state.store, interview_id))
