"""Signing instructors in: a one-time link from `ampquiz instructor add|link NAME` is exchanged
(by a POST, so a link preview or prefetch never spends it) for a signed session cookie that only
/studio sees, naming the session the link opened (an id of its own, fresh at each sign-in).
Signing out ends that session on the server (a copy of the cookie is refused too); removing an
instructor ends all of theirs at the next request."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response
from itsdangerous import BadSignature, SignatureExpired, TimestampSigner

from app import instructors
from app.web.cookies import over_tls, set_cookie
from app.web.deps import State
from app.web.errors import AppError
from app.web.rendering.render import page
from app.web.state import WebState

router = APIRouter(prefix="/studio", include_in_schema=False)

COOKIE = "ampquiz_instructor"
SESSION_S = 12 * 3600


class InstructorsOnly(AppError):
    status = 403
    message = (
        "This is the instructors' studio. Sign in with the link that the command "
        "\u201campquiz instructor link NAME\u201d prints on the server."  # the page shows no Markdown
    )


def _signer(state: WebState) -> TimestampSigner:
    return TimestampSigner(state.secret, salt="ampquiz-instructor")


def _session(request: Request, state: WebState) -> tuple[str, str] | None:
    """The instructor's name and session from a valid cookie (signed, not expired), else None."""
    value = request.cookies.get(COOKIE)
    if not value:
        return None
    try:
        name, _, session = _signer(state).unsign(value, max_age=SESSION_S).decode().partition("/")
    except (BadSignature, SignatureExpired, UnicodeDecodeError):
        return None
    return (name, session) if name and session else None


async def instructor(request: Request, state: State) -> str:
    """The signed-in instructor's name; 403 for anyone else (learners included), and for a
    session that signed out or whose instructor was removed."""
    found = _session(request, state)
    if found is not None and await run_in_threadpool(instructors.in_session, state.store, *found):
        return found[0]
    raise InstructorsOnly()


Instructor = Annotated[str, Depends(instructor)]


@router.get("/sign-in")
async def how_to_sign_in(request: Request, state: State) -> Response:
    return await page(state, request, "studio/sign_in.html", token=None, spent=False)


@router.get("/sign-in/{token}")
async def sign_in_page(token: str, request: Request, state: State) -> Response:
    return await page(state, request, "studio/sign_in.html", token=token, spent=False)


@router.post("/sign-in/{token}")
async def sign_in(token: str, request: Request, state: State) -> Response:
    signed = await run_in_threadpool(
        lambda: instructors.sign_in(state.store, token, now=state.clock())
    )
    if signed is None:
        return await page(
            state, request, "studio/sign_in.html", status_code=403, token=None, spent=True
        )
    response = RedirectResponse("/studio", status_code=303)
    value = _signer(state).sign(f"{signed.name}/{signed.session}").decode()
    response.headers.append(*_cookie(request, state, value, max_age=SESSION_S))
    return response


@router.post("/sign-out")
async def sign_out(who: Instructor, request: Request, state: State) -> Response:
    found = _session(request, state)
    if found is not None:
        await run_in_threadpool(instructors.end_session, state.store, found[1])
    response = RedirectResponse("/", status_code=303)
    response.headers.append(*_cookie(request, state, "", max_age=0))  # deleted
    return response


def _cookie(request: Request, state: WebState, value: str, *, max_age: int) -> tuple[str, str]:
    """The session cookie's header: only /studio sees it, `Secure` where the studio is on TLS."""
    secure = over_tls(request.scope, state.settings.secure_cookies())
    name, header = set_cookie(
        COOKIE, value, path="/studio", max_age=max_age, samesite="strict", secure=secure
    )
    return name.decode(), header.decode("latin-1")
