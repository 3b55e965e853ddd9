"""Every cookie the app sets is `Secure` where learners reach it over TLS: the public URL is https
(`AMPQUIZ_PUBLIC_URL`), or the request came over TLS, directly or through a proxy the operator
trusts (`AMPQUIZ_TRUSTED_PROXIES`) saying so in `X-Forwarded-Proto`. Not otherwise: a browser
keeps no Secure cookie from a plain-http page, and an untrusted client's header proves nothing.
Without the flag, a browser sent the learner's and the instructor's cookies in the clear to any
http:// address of the same host (a network attacker's injected link), for anyone on the path."""

from __future__ import annotations

import httpx
import pytest

from app import instructors
from app.web.deps import LEARNER_COOKIE
from app.web.routes.studio.auth import COOKIE as STUDIO_COOKIE
from tests.support.server import Server
from tests.support.web import Web, as_instructor

PUBLIC_URL = "https://quiz.example.edu"


def set_cookies(response: httpx.Response) -> dict[str, str]:
    """Each cookie the response sets, by name: its whole Set-Cookie header."""
    return {h.partition("=")[0]: h for h in response.headers.get_list("set-cookie")}


def attributes(header: str) -> set[str]:
    return {part.strip().partition("=")[0].lower() for part in header.split(";")[1:]}


async def cookies_set(
    web: Web, base_url: str = "http://testserver", **settings: str
) -> dict[str, str]:
    """The learner cookie (from a page), the studio's (from signing in) and the studio's again
    (signing out: it is deleted), as this app sets them."""
    async with web.client(proved=False, **settings) as client:
        client.base_url = httpx.URL(base_url)
        found = set_cookies(await client.get("/"))
        store = client.app.state.web.store  # type: ignore[attr-defined]
        instructors.add(store, "ada")
        signed_in = await client.post(f"/studio/sign-in/{instructors.new_link(store, 'ada')}")
        assert signed_in.status_code == 303
        found["studio sign-in"] = set_cookies(signed_in)[STUDIO_COOKIE]
        client.cookies.clear()  # (the jar would not send a Secure cookie over http)
        signed_out = await client.post(
            "/studio/sign-out", headers=as_instructor(signed_in.cookies[STUDIO_COOKIE])
        )
        assert signed_out.status_code == 303
        found["studio sign-out"] = set_cookies(signed_out)[STUDIO_COOKIE]
    return found


def assert_all(found: dict[str, str], secure: bool) -> None:
    assert set(found) == {LEARNER_COOKIE, "studio sign-in", "studio sign-out"}
    for name, header in found.items():
        assert ("secure" in attributes(header)) is secure, (name, header)
        if name != "studio sign-out":  # (an expired cookie's flags protect nothing)
            assert "httponly" in attributes(header), header  # as before
    assert "samesite=lax" in found[LEARNER_COOKIE].lower()
    assert "samesite=strict" in found["studio sign-in"].lower()


pytestmark = pytest.mark.anyio


async def test_cookies_are_secure_when_the_public_url_is_https(web: Web) -> None:
    """A TLS-terminating proxy that does not say so (or is not trusted): the public URL does."""
    assert_all(await cookies_set(web, public_url=PUBLIC_URL), secure=True)


async def test_cookies_are_secure_when_the_request_came_over_tls(web: Web) -> None:
    assert_all(await cookies_set(web, base_url="https://testserver"), secure=True)


async def test_cookies_are_not_secure_over_plain_http(web: Web) -> None:
    """A server on a laptop or a class's LAN (http://): a Secure cookie would never come back."""
    assert_all(await cookies_set(web), secure=False)
    assert_all(await cookies_set(web, public_url="http://quiz.lan:8000"), secure=False)


def learner_cookie(server: Server, local_address: str, headers: dict[str, str]) -> str:
    transport = httpx.HTTPTransport(local_address=local_address)
    with httpx.Client(
        base_url=server.url, transport=transport, headers=headers, timeout=30
    ) as client:
        return set_cookies(client.get("/"))[LEARNER_COOKIE]


def test_x_forwarded_proto_is_believed_only_from_a_trusted_proxy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real `ampquiz serve` trusting the proxy on 127.0.0.1; a client connecting from 127.0.0.2
    is not that proxy, and its own X-Forwarded-Proto changes nothing."""
    server = Server(tmp_path)
    server.env["AMPQUIZ_TRUSTED_PROXIES"] = "127.0.0.1"
    server.start()
    try:
        https = {"X-Forwarded-Proto": "https"}
        assert "secure" in attributes(learner_cookie(server, "127.0.0.1", https))
        assert "secure" not in attributes(learner_cookie(server, "127.0.0.1", {}))
        assert "secure" not in attributes(learner_cookie(server, "127.0.0.2", https))
    finally:
        server.stop()
