"""One way to fail: a small error hierarchy and one handler that renders every error.

Browsers get a friendly HTML page; `/api`, `/healthz` and JSON clients get one shape,
`{"ok": false, "error": "message", "status": 404}` — for our own errors, unknown routes,
FastAPI's validation errors (422) and crashes (500) alike.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.bank.edit import NotASet
from app.bank.workspace import SET_FILE_BYTES, NoSuchFile, WorkspaceError
from app.runs.queue import QueueFull
from sandbox import SandboxError

log = logging.getLogger("ampquiz.web")

TITLES = {
    400: "That did not work",
    403: "Not from here",
    404: "Not found",
    405: "Not allowed",
    413: "Too large",
    422: "That did not look right",
    429: "Busy right now",
    500: "Something broke",
    503: "Not ready",
}


class AppError(Exception):
    """An error a user can be told about: a status and a sentence that helps."""

    status = 400
    message = "The request could not be handled."

    def __init__(
        self, message: str | None = None, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message or self.message)
        self.message = message or self.message
        self.headers = headers or {}


class NotFound(AppError):
    status = 404
    message = "There is nothing here."


class NotReady(AppError):
    status = 503
    message = "The server is still starting (the sandbox is warming up). Try again in a moment."


class PayloadTooLarge(AppError):
    status = 413
    message = "That code is too long to run here."


class NotGraded(AppError):
    """A question whose key this server has not proved (being checked) or that its run
    contradicts (under review): shown, never graded."""

    status = 409

    def __init__(self, state: str) -> None:
        if state == "pending":
            super().__init__(
                "This question's answer key is being checked by running its code; try again in a few seconds.",
                headers={"Retry-After": "2"},
            )
        else:
            super().__init__(
                "This question is under review: running its code contradicts its answer key, so it is not graded."
            )
        self.state = state


class SandboxDown(AppError):
    status = 503
    message = (
        "The sandbox that runs code is not working right now; the error was logged. Try again soon."
    )


class TooManyRuns(AppError):
    status = 429
    message = "Every sandbox worker is busy and the queue is full. Try again in a few seconds."

    def __init__(self, retry_after_s: int, reason: str = "queue", limit: int = 0) -> None:
        if reason == "learner":
            said = f"You already have {limit} runs going; wait for one to finish (about {retry_after_s} s)."
        elif reason == "address":
            said = f"Your network already has {limit} runs going; try again in {retry_after_s} s."
        else:
            said = f"Every sandbox worker is busy and the queue is full. Try again in {retry_after_s} s."
        super().__init__(said, headers={"Retry-After": str(retry_after_s)})
        self.retry_after_s = retry_after_s


RUN_REFUSED = (QueueFull, SandboxError)
"""What a run raises when it could not even start; `run_refusal` says it. Catch these, and only
these: anything else a run raises is a fault of ours (a 500)."""


def run_refusal(exc: QueueFull | SandboxError, doing: str | None = None) -> AppError:
    """What a user is told when a run could not even start: the queue is full (429, with when to
    come back) or the sandbox is down (503; logged, with what was being done, where `doing` says
    it). The one place that turns these into an answer, for the API, the pages, the studio and
    the run shown with an answered question: raised (the handler renders it), or shown on a page."""
    if isinstance(exc, QueueFull):
        return TooManyRuns(exc.retry_after_s, exc.reason, exc.limit)
    if doing is not None:
        log.error("sandbox failure %s: %s", doing, exc)
    return SandboxDown()


def too_large_message(settings: Any, path: str = "") -> str:
    if path.startswith("/studio/"):
        return f"That request is too large to read; a question-set file is limited to {SET_FILE_BYTES // 1024} KiB."
    limit = f"; code is limited to {settings.max_code_bytes} bytes" if settings else ""
    return f"That request is too large to read{limit}."


def wants_json(request: Request) -> bool:
    """JSON for the API and for clients that ask for it; HTML for browsers."""
    path = request.url.path
    if path.startswith(("/api", "/studio/api")) or path in ("/healthz", "/openapi.json"):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"ok": False, "error": message, "status": status}


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(
            str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "form")
        )
        msg = str(err.get("msg", "is not valid"))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "Invalid request: " + "; ".join(parts) if parts else "Invalid request."


def render_error(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    if wants_json(request):
        return JSONResponse(error_body(status, message), status_code=status, headers=headers)
    templates = getattr(request.app.state, "templates", None)
    if templates is None:  # failing before the app is set up: still say something readable
        return HTMLResponse(
            f"<h1>{status}</h1><p>{message}</p>", status_code=status, headers=headers
        )
    context = {"status": status, "title": TITLES.get(status, "Error"), "message": message}
    return templates.TemplateResponse(
        request, "error.html", context, status_code=status, headers=headers
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(AppError)
    async def _app_error(request: Request, exc: AppError) -> Response:
        return render_error(request, exc.status, exc.message, exc.headers)

    @app.exception_handler(NotASet)
    async def _not_a_set(request: Request, exc: NotASet) -> Response:
        # A studio edit of half-typed YAML: a sentence for its author, whichever edit it was.
        return render_error(request, 400, str(exc))

    @app.exception_handler(WorkspaceError)
    async def _workspace_refused(request: Request, exc: WorkspaceError) -> Response:
        # What the bank's folder refuses the studio (a file name, a size): said as it is.
        return render_error(request, 404 if isinstance(exc, NoSuchFile) else 400, str(exc))

    @app.exception_handler(QueueFull)
    @app.exception_handler(SandboxError)
    async def _run_refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RUN_REFUSED)
        err = run_refusal(exc, doing=f"on {request.url.path}")
        return render_error(request, err.status, err.message, err.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            message = (
                "There is no page at this address." if not wants_json(request) else "Not found."
            )
            if exc.detail and exc.detail != "Not Found":
                message = str(exc.detail)
        elif exc.status_code == 413:  # app.web.middleware.BodyLimit stopped reading a streamed body
            message = too_large_message(
                getattr(request.app.state, "settings", None), request.url.path
            )
        else:
            message = str(exc.detail)
        return render_error(request, exc.status_code, message, dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return render_error(request, 422, _validation_message(exc))

    @app.exception_handler(OperationalError)
    async def _database_error(request: Request, exc: OperationalError) -> Response:
        # When the database does not answer at all (down, gone: a second try on a fresh
        # connection failed too), the learner hears that, and that nothing they sent was kept.
        # Anything else it said (a table missing, say) is a fault of ours: a 500 like any other.
        state = getattr(request.app.state, "web", None)
        if state is None or await asyncio.to_thread(state.store.ping):
            return await _crash(request, exc)
        log.error("database unreachable on %s %s: %s", request.method, request.url.path, exc.orig)
        message = ("The database cannot be reached right now, so nothing could be read or saved. "
                   "Please try again in a minute.")  # fmt: skip
        return render_error(request, 503, message, {"Retry-After": "30"})

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return render_error(request, 500, "Something went wrong on our side. The error was logged.")
