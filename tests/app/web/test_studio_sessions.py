"""An instructor's studio session ends on the server: signing out refuses every copy of its
cookie, and an instructor removed (even one who has signed in) loses the studio at once, and does
not get it back by being added again under the same name."""

from __future__ import annotations

import httpx
import pytest

from app import instructors
from app.web.studio.auth import COOKIE
from tests.support.web import Web

pytestmark = pytest.mark.anyio


async def _signed_in(client: httpx.AsyncClient, name: str) -> str:
    """Signs `name` in with a fresh link; returns the session cookie's value."""
    store = client.app.state.web.store  # type: ignore[attr-defined]
    token = instructors.new_link(store, name)
    signed = await client.post(f"/studio/sign-in/{token}")
    assert signed.status_code == 303
    client.cookies.clear()  # each request below says which session it is
    return signed.cookies[COOKIE]


def _as(cookie: str) -> dict[str, str]:
    return {"cookie": f"{COOKIE}={cookie}"}


async def _studio_with(client: httpx.AsyncClient, cookie: str) -> int:
    client.cookies.clear()
    return (await client.get("/studio", headers=_as(cookie))).status_code


async def test_signing_out_ends_the_session_for_every_copy_of_its_cookie(web: Web) -> None:
    async with web.client() as client:
        instructors.add(client.app.state.web.store, "ada")  # type: ignore[attr-defined]
        cookie = await _signed_in(client, "ada")
        assert await _studio_with(client, cookie) == 200
        other = await _signed_in(client, "ada")  # a second browser
        assert (await client.post("/studio/sign-out", headers=_as(other))).status_code == 303
        assert await _studio_with(client, other) == 403  # the session signed out just now
        assert await _studio_with(client, cookie) == 200  # the other browser's is its own


async def test_a_removed_instructor_loses_the_studio_and_adding_the_name_again_does_not_bring_it_back(web: Web) -> None:
    async with web.client() as client:
        store = client.app.state.web.store  # type: ignore[attr-defined]
        instructors.add(store, "bob")
        cookie = await _signed_in(client, "bob")
        instructors.new_link(store, "bob")  # and a link never used
        assert await _studio_with(client, cookie) == 200
        assert instructors.remove(store, "bob") is True  # with links of theirs stored
        assert await _studio_with(client, cookie) == 403
        assert instructors.add(store, "bob") is True
        assert await _studio_with(client, cookie) == 403
