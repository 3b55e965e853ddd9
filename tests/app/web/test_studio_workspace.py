"""What the bank's folder refuses the studio (`app.bank.workspace`) reaches its author as a page
or the studio API's error: a name the bank has no file for is a 404, a bad or taken name a 400."""

from __future__ import annotations

import json

import pytest

from app import instructors
from tests.support.web import Web, as_instructor, studio_session

pytestmark = pytest.mark.anyio


async def test_the_folders_refusals_are_said_as_they_are(web: Web) -> None:
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = as_instructor(await studio_session(c, "ada"))
        missing = await c.get("/studio/edit/nothing-here.yaml", headers=who)
        assert (
            missing.status_code == 404
            and "The bank has no file &#39;nothing-here.yaml&#39;." in missing.text
        )
        bad = await c.post(
            "/studio/new-set", data={"name": "Not A Name.yaml", "title": "T"}, headers=who
        )
        assert bad.status_code == 400 and "lowercase words joined by &#39;-&#39;" in bad.text
        taken = await c.post(
            "/studio/new-set", data={"name": "basics.yaml", "title": "T"}, headers=who
        )
        assert (
            taken.status_code == 400
            and "basics.yaml exists already: open it instead." in taken.text
        )
        api = {**who, "content-type": "application/json"}
        saved = await c.post(
            "/studio/api/save",
            content=json.dumps({"name": "../basics.yaml", "text": "title: T\n", "version": ""}),
            headers=api,
        )
        assert saved.status_code == 400 and saved.json() == {
            "ok": False,
            "status": 400,
            "error": "A set's file name is lowercase words joined by '-', ending in .yaml.",
        }
        assert not (web.bank.parent / "basics.yaml").exists()
