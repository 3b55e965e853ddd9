"""The web server: `create_app(settings)` builds the FastAPI app (pages, JSON API, static files).

The app's lifespan starts one sandbox pool (unless a test passes its own) and hides the database
folder from snippets. Everything the app holds lives on `app.state.web`, so tests build variants.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from itsdangerous import BadSignature, URLSafeSerializer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.runner import Pool, Runner
from app.settings import Settings
from app.store import Store, utcnow
from app.web_errors import install_error_handlers, render_error, too_large_message
from app.web_render import STATIC, make_templates
from app.web_state import LEARNER_COOKIE, BankSource, WebState

log = logging.getLogger("ampquiz.web")

COOKIE_MAX_AGE_S = 2 * 365 * 24 * 3600

API_DESCRIPTION = """\
Practise PyTorch Automatic Mixed Precision: questions whose answers were proved by running them.

Learners are anonymous: the first response sets a signed `ampquiz_learner` cookie; send it back
to keep your attempts and progress. Questions never include their answer key; an attempt's
response carries the outcome, the feedback, the explanation and the run of the question's code.
Every error has the shape `{"ok": false, "error": "message", "status": 404}`.
"""


class LearnerCookie:
    """Gives every request an anonymous learner id from a signed cookie, issuing one when missing.

    Plain ASGI (not BaseHTTPMiddleware), so it costs microseconds and never buffers bodies.
    """

    def __init__(self, app: ASGIApp, secret_key: str) -> None:
        self.app = app
        self.signer = URLSafeSerializer(secret_key, salt="ampquiz-learner")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        learner, is_new = None, False
        for name, value in _cookies(scope):
            if name == LEARNER_COOKIE:
                try:
                    learner = str(self.signer.loads(value))
                except BadSignature:
                    learner = None
                break
        if learner is None:
            learner, is_new = uuid.uuid4().hex, True
        scope.setdefault("state", {})["learner_id"] = learner

        async def send_with_cookie(message: Message) -> None:
            if is_new and message["type"] == "http.response.start":
                cookie = (
                    f"{LEARNER_COOKIE}={self.signer.dumps(learner)}; Path=/; Max-Age={COOKIE_MAX_AGE_S}; "
                    "HttpOnly; SameSite=Lax"
                )
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"set-cookie", cookie.encode("latin-1")),
                ]
            await send(message)

        await self.app(scope, receive, send_with_cookie)


class SecurityHeaders:
    """Headers every response carries: no MIME sniffing, no framing, scripts only from /static.

    Swagger UI (/docs) starts itself with an inline script, so its page is left without the CSP.
    """

    CSP = (
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        b"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = not scope["path"].startswith("/docs")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                ]
                if csp:
                    extra.append((b"content-security-policy", self.CSP))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodyLimit:
    """Refuses a request body over `max_bytes` with 413 before reading it: at once when its
    Content-Length says so, or as soon as a streamed (chunked) body goes past the limit.

    (FastAPI's own `max_body_size` answers a declared oversized body in plain text, outside
    the one error shape.)
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope["headers"]:
            if key == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await _too_large(scope)(scope, receive, send)
                return
        seen = 0

        async def receive_within_limit() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                # Raised where the app reads the body; the error handlers render it.
                raise StarletteHTTPException(413)
            return message

        await self.app(scope, receive_within_limit, send)


def _too_large(scope: Scope) -> Response:
    return render_error(Request(scope), 413, too_large_message(scope["app"].state.settings))


def _cookies(scope: Scope) -> list[tuple[str, str]]:
    out = []
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                name, _, val = part.strip().partition("=")
                out.append((name, val))
    return out


def _mount_docs(app: FastAPI) -> None:
    """Swagger UI served from a local copy (this machine may have no network), when installed."""
    try:
        import swagger_ui_bundle  # from the swagger-ui-bundle-v2 package
    except ImportError:
        return  # FastAPI's own /docs (loads Swagger UI from a CDN)
    app.mount(
        "/docs-static", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-static"
    )

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="ampquiz API",
            swagger_js_url="/docs-static/swagger-ui-bundle.js",
            swagger_css_url="/docs-static/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
        )


def create_app(
    settings: Settings | None = None,
    *,
    sandbox: Pool | None = None,
    clock: Callable[[], datetime] | None = None,
) -> FastAPI:
    """Builds the app. `sandbox`: an already started pool to share (tests); `clock`: for reviews."""
    settings = settings or Settings.from_env()
    store = Store(settings.database_url)
    bank_source = BankSource(settings.bank)
    templates = make_templates()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        own = sandbox is None
        pool: Any = sandbox
        if own:
            from sandbox import Sandbox

            pool = Sandbox(
                workers=settings.sandbox_workers, hide=[str(settings.data_dir().resolve())]
            )
            await asyncio.to_thread(pool.start)
            log.info(
                "sandbox: %d workers on %s",
                settings.sandbox_workers,
                pool.environment.get("device_kind"),
            )
        from sandbox import Limits

        limits = Limits(wall_s=settings.run_wall_s, cpu_s=max(1, math.ceil(settings.run_wall_s)))
        workers = int(getattr(pool, "workers", settings.sandbox_workers))
        runner = Runner(pool, workers=workers, queue=settings.run_queue, limits=limits)
        app.state.web = WebState(settings, store, runner, bank_source, templates, clock or utcnow)
        try:
            yield {}
        finally:
            runner.close()
            if own:
                await asyncio.to_thread(pool.close)
            store.close()

    docs_available = _has_local_docs()
    app = FastAPI(
        title="ampquiz",
        description=API_DESCRIPTION,
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None if docs_available else "/docs",
        redoc_url=None,
    )
    app.state.templates = templates
    app.state.settings = settings
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes())  # innermost of ours
    app.add_middleware(LearnerCookie, secret_key=settings.resolved_secret_key())
    app.add_middleware(SecurityHeaders)
    install_error_handlers(app)
    if docs_available:
        _mount_docs(app)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    from app import web_api, web_pages

    app.include_router(web_api.router)
    app.include_router(web_api.health)
    app.include_router(web_pages.router)
    return app


def _has_local_docs() -> bool:
    try:
        import swagger_ui_bundle  # noqa: F401
    except ImportError:
        return False
    return True
