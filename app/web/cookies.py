"""Every cookie the app sets is written here, so each gets the same flags: `HttpOnly`, its
`SameSite`, and `Secure` wherever learners reach the server over TLS.

Over TLS means: the public URL (`AMPQUIZ_PUBLIC_URL`) is https, or the request came over TLS. A
request's scheme is https when uvicorn served TLS itself, or when a proxy the operator trusts
(`AMPQUIZ_TRUSTED_PROXIES`, which `serve` hands uvicorn) said `X-Forwarded-Proto: https`; anyone
else's header is ignored there, before the app sees the request. Without `Secure`, a browser sent
the cookies in the clear to any http:// address of the host (a link injected by someone on the
network), for them to read and replay.
"""

from __future__ import annotations

import re
from typing import Literal

from starlette.types import Scope

_UNSAFE = re.compile(r"[^\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]")
"""Anything but RFC 6265's cookie-octets (no space, quote, comma, semicolon or backslash)."""


def over_tls(scope: Scope, public_url_is_https: bool) -> bool:
    """Whether cookies set in answer to this request should be `Secure`."""
    return public_url_is_https or scope.get("scheme") in ("https", "wss")


def set_cookie(
    name: str,
    value: str,
    *,
    path: str,
    max_age: int,
    samesite: Literal["lax", "strict"],
    secure: bool,
) -> tuple[bytes, bytes]:
    """The `Set-Cookie` header (name, value) for one cookie; `max_age=0` deletes it. The value must
    be a cookie-safe token (the signers' output is)."""
    if _UNSAFE.search(value):
        raise ValueError(f"{name}'s value would need quoting")
    parts = [f"{name}={value}", f"Path={path}", f"Max-Age={max_age}"]
    if max_age <= 0:  # what a browser that predates Max-Age reads
        parts.append("Expires=Thu, 01 Jan 1970 00:00:00 GMT")
    parts += ["HttpOnly", f"SameSite={samesite.capitalize()}"]
    if secure:
        parts.append("Secure")
    return b"set-cookie", "; ".join(parts).encode("latin-1")
