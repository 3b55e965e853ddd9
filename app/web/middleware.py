"""The app's own ASGI middleware: the learner cookie, security headers, the request-body limit.

Plain ASGI (not BaseHTTPMiddleware), so each costs microseconds and never buffers bodies.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from itsdangerous import BadSignature, URLSafeSerializer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.web.cookies import over_tls, set_cookie
from app.web.deps import LEARNER_COOKIE
from app.web.errors import render_error, too_large_message

COOKIE_MAX_AGE_S = 2 * 365 * 24 * 3600


UNPERSONAL = ("/static/", "/docs-static/")
"""Paths whose responses are the same for everyone: no learner id, and no cookie issued (a
response that sets one is kept by no shared cache)."""


class LearnerCookie:
    """Gives every request an anonymous learner id from a signed cookie, issuing one when missing."""

    KNOWN = 50_000
    """Cookies already verified, remembered so a learner's next request skips the HMAC."""

    def __init__(
        self, app: ASGIApp, secret_key: str, public_url_is_https: bool | None = None
    ) -> None:
        self.app = app
        self.signer = URLSafeSerializer(secret_key, salt="ampquiz-learner")
        self._known: dict[str, str] = {}
        self.public_url_is_https = public_url_is_https
        """None: as the app's settings say (`AMPQUIZ_PUBLIC_URL`), read at the first request."""

    def _public_url_is_https(self, scope: Scope) -> bool:
        if self.public_url_is_https is None:
            settings = getattr(getattr(scope.get("app"), "state", None), "settings", None)
            self.public_url_is_https = bool(settings is not None and settings.secure_cookies())
        return self.public_url_is_https

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(UNPERSONAL):
            await self.app(scope, receive, send)
            return
        learner, is_new = None, False
        for name, value in _cookies(scope):
            if name == LEARNER_COOKIE:
                learner = self._known.get(value)
                if learner is None:
                    try:
                        learner = str(self.signer.loads(value))
                    except BadSignature:
                        break
                    if len(self._known) >= self.KNOWN:
                        self._known.clear()  # a simple bound: the next requests verify again
                    self._known[value] = learner
                break
        if learner is None:
            learner, is_new = uuid.uuid4().hex, True
        scope.setdefault("state", {})["learner_id"] = learner

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = set_cookie(
                    LEARNER_COOKIE, self.signer.dumps(learner), path="/", max_age=COOKIE_MAX_AGE_S,
                    samesite="lax", secure=over_tls(scope, self._public_url_is_https(scope)),
                )  # fmt: skip
                message["headers"] = [*message.get("headers", []), cookie]
            await send(message)

        await self.app(scope, receive, send_with_cookie if is_new else send)


class SecurityHeaders:
    """Headers every response carries, /docs included: no MIME sniffing, no framing, scripts only
    from this server (Swagger UI starts from /static/docs.js, not an inline script)."""

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
        csp = True

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

    def __init__(self, app: ASGIApp, max_bytes: int, studio_max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.studio_max_bytes = studio_max_bytes or max_bytes
        """The studio's calls carry a whole question-set file, larger than any snippet."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.studio_max_bytes if scope["path"].startswith("/studio/") else self.max_bytes
        for key, value in scope["headers"]:
            if key == b"content-length" and value.isdigit() and int(value) > limit:
                await _too_large(scope)(scope, receive, send)
                return
        seen = 0

        async def receive_within_limit() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                # Raised where the app reads the body; the error handlers render it.
                raise StarletteHTTPException(413)
            return message

        await self.app(scope, receive_within_limit, send)


def _too_large(scope: Scope) -> Response:
    request = Request(scope)
    return render_error(
        request, 413, too_large_message(scope["app"].state.settings, request.url.path)
    )


def _cookies(scope: Scope) -> list[tuple[str, str]]:
    out = []
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                name, _, val = part.strip().partition("=")
                out.append((name, val))
    return out


class SameOrigin:
    """Refuses a state-changing request (anything but GET, HEAD, OPTIONS) that a browser sent from
    another site: its `Origin` names another host, or it is `null` (a sandboxed frame), or, with no
    `Origin`, `Sec-Fetch-Site` says cross-site. Forms then cannot be posted to ampquiz from another
    page (an answer recorded, a run started in a learner's name). Requests from other programs
    carry neither header and pass: they hold no learner's cookie unless given one.

    Behind a reverse proxy, the proxy must pass the `Host` header through (or set it to the
    public host), as is usual.
    """

    SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in self.SAFE and _cross_site(scope):
            message = "This was sent from another site. ampquiz takes answers and runs only from its own pages."
            await render_error(Request(scope), 403, message)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _cross_site(scope: Scope) -> bool:
    headers = dict(scope.get("headers", []))
    origin = headers.get(b"origin")
    if origin is not None:
        if origin == b"null":
            return True
        host = headers.get(b"host", b"").decode("latin-1").lower()
        return urlsplit(origin.decode("latin-1")).netloc.lower() != host
    return headers.get(b"sec-fetch-site") == b"cross-site"
