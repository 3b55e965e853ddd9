"""Studio saves are compare-and-swap: the editor page carries the version of the file it opened
(a hash of its bytes) and a save sends it back; a save over a file that changed since is a 409
with the other save's changes against what this author opened, and nothing is lost. Two authors
on one file were both told "ok" while the second save silently replaced the first."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from app import instructors
from tests.support.web import BANK, Web, as_instructor, studio_session

pytestmark = pytest.mark.anyio


async def opened(c: httpx.AsyncClient, name: str, who: dict[str, str]) -> str:
    """The version the editor page of `name` carries ("" where it carries none)."""
    page = await c.get(f"/studio/edit/{name}", headers=who)
    assert page.status_code == 200, page.text[:300]
    found = re.search(r'data-version="([^"]*)"', page.text)
    return found.group(1) if found else ""


async def test_a_save_over_a_file_saved_since_is_a_conflict_with_what_changed(web: Web) -> None:
    original = BANK["basics.yaml"]
    theirs = original.replace(
        "description: A *small* set used by the web tests.", "description: Bob's words."
    )
    mine = original.replace(
        "prompt: Which dtype does this print?", "prompt: Ada's question, which dtype?"
    )
    async with web.client() as c:
        store = c.app.state.web.store  # type: ignore[attr-defined]
        instructors.add(store, "ada")
        instructors.add(store, "bob")
        ada = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        bob = {**as_instructor(await studio_session(c, "bob")), "content-type": "application/json"}
        ada_opened, bob_opened = (
            await opened(c, "basics.yaml", ada),
            await opened(c, "basics.yaml", bob),
        )
        assert ada_opened == bob_opened

        first = await c.post("/studio/api/save", headers=bob, content=json.dumps(
            {"name": "basics.yaml", "text": theirs, "version": bob_opened, "base": original}))  # fmt: skip
        assert first.status_code == 200 and first.json()["ok"] is True, first.text
        second = await c.post("/studio/api/save", headers=ada, content=json.dumps(
            {"name": "basics.yaml", "text": mine, "version": ada_opened, "base": original}))  # fmt: skip
        assert second.status_code == 409, second.text
        said = second.json()
        assert said["ok"] is False and "saved since you opened it" in said["error"]
        assert "-description: A *small* set used by the web tests.\n" in said["diff"]
        assert "+description: Bob's words.\n" in said["diff"] and "Ada" not in said["diff"]
        assert said["current"] == theirs and said["version"] == first.json()["version"]
        assert (web.bank / "basics.yaml").read_text() == theirs  # nothing lost

        # Ada merges (keeps Bob's description) and saves on the version she was shown
        merged = mine.replace(
            "description: A *small* set used by the web tests.", "description: Bob's words."
        )
        again = await c.post("/studio/api/save", headers=ada, content=json.dumps(
            {"name": "basics.yaml", "text": merged, "version": said["version"], "base": said["current"]}))  # fmt: skip
        assert again.status_code == 200, again.text
        assert (web.bank / "basics.yaml").read_text() == merged
        assert await opened(c, "basics.yaml", ada) == again.json()["version"]


async def test_a_save_without_the_version_it_replaces_is_refused(web: Web) -> None:
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        ada = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        blind = await c.post(
            "/studio/api/save",
            headers=ada,
            content=json.dumps({"name": "basics.yaml", "text": BANK["basics.yaml"] + "# x\n"}),
        )
        assert blind.status_code == 422 and "version" in blind.json()["error"], blind.text
        assert (web.bank / "basics.yaml").read_text() == BANK["basics.yaml"]
        # a new file's version is "": it is saved once, and a second author's save of the same new name conflicts
        new = "title: T\n"
        made = await c.post(
            "/studio/api/save",
            headers=ada,
            content=json.dumps({"name": "fresh-one.yaml", "text": new, "version": ""}),
        )
        assert made.status_code == 200 and made.json()["draft"] is True, made.text
        twice = await c.post(
            "/studio/api/save",
            headers=ada,
            content=json.dumps({"name": "fresh-one.yaml", "text": "title: U\n", "version": ""}),
        )
        assert twice.status_code == 409 and twice.json()["current"] == new
