"""An instructor's studio session ends on the server: signing out refuses every copy of its
cookie, and an instructor removed (even one who has signed in) loses the studio at once, and does
not get it back by being added again under the same name."""

from __future__ import annotations

import httpx
import pytest

from app import instructors
from tests.support.web import Web, as_instructor, studio_session

pytestmark = pytest.mark.anyio


async def _studio_with(client: httpx.AsyncClient, cookie: str) -> int:
    client.cookies.clear()
    return (await client.get("/studio", headers=as_instructor(cookie))).status_code


async def test_signing_out_ends_the_session_for_every_copy_of_its_cookie(web: Web) -> None:
    async with web.client() as client:
        instructors.add(client.app.state.web.store, "ada")  # type: ignore[attr-defined]
        cookie = await studio_session(client, "ada")
        assert await _studio_with(client, cookie) == 200
        other = await studio_session(client, "ada")  # a second browser
        assert (
            await client.post("/studio/sign-out", headers=as_instructor(other))
        ).status_code == 303
        assert await _studio_with(client, other) == 403  # the session signed out just now
        assert await _studio_with(client, cookie) == 200  # the other browser's is its own


async def test_a_removed_instructor_loses_the_studio_and_adding_the_name_again_does_not_bring_it_back(
    web: Web,
) -> None:
    async with web.client() as client:
        store = client.app.state.web.store  # type: ignore[attr-defined]
        instructors.add(store, "bob")
        cookie = await studio_session(client, "bob")
        instructors.new_link(store, "bob")  # and a link never used
        assert await _studio_with(client, cookie) == 200
        assert instructors.remove(store, "bob") is True  # with links of theirs stored
        assert await _studio_with(client, cookie) == 403
        assert instructors.add(store, "bob") is True
        assert await _studio_with(client, cookie) == 403
