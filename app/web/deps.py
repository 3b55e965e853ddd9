"""FastAPI dependencies, declared once for the API and the pages: the app's state and the learner."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.web.errors import NotReady
from app.web.state import WebState

LEARNER_COOKIE = "ampquiz_learner"


async def web_state(request: Request) -> WebState:
    """The app's state; 503 until the lifespan has set it up. Async, so FastAPI does not hand it
    to a thread."""
    state = getattr(request.app.state, "web", None)
    if state is None:
        raise NotReady()
    return state


async def learner_id(request: Request) -> str:
    """The anonymous learner's id, set by the cookie middleware on every request."""
    return request.scope["state"]["learner_id"]


State = Annotated[WebState, Depends(web_state)]
Learner = Annotated[str, Depends(learner_id)]
