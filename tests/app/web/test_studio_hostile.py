"""What a hostile text or file does to the studio: every call answers in words (a 4xx, or a
result with the problems at their lines), never a 500. Text nested 600 levels deep answered a
500 on Save, and a file name ending in a newline wrote a file the bank never reads (and a 500)."""

from __future__ import annotations

import json
import os

import pytest

from app import instructors
from app.bank.workspace import SET_FILE_BYTES
from tests.support.web import BANK, Web, as_instructor, studio_session

pytestmark = pytest.mark.anyio

QUESTION = BANK["basics.yaml"]
TEXTS = {
    "nested 600 deep": ("title: " + "[" * 600 + "]" * 600 + "\n", 1, "nested"),
    "a control character": (QUESTION.replace("prompt: Which dtype does this print?", 'prompt: "Which\\x01?"'), 0, "U+0001"),
    "a number no one can read": (QUESTION.replace("difficulty: 2", "difficulty: " + "9" * 5000), 0, "difficulty"),
    # PyYAML's own constructor raised AttributeError on an explicit tag it cannot build
    "a tag its value cannot be": (QUESTION.replace("source: tests", "source: !!timestamp z", 1), 0, "source"),
    "an impossible date": (QUESTION.replace("source: tests", "source: 2001-13-45", 1), 0, "source"),
    "a number as a key": (QUESTION.replace("source: tests", "source: tests\n    1: one", 1), 0, "key"),
    "aliases of a long text": ("title: &t " + "x" * 100_000 + "\ndescription: d\nquestions: [" + ", ".join(["*t"] * 1000) + "]\n",
                               0, "aliases"),
}  # fmt: skip


@pytest.mark.parametrize("what", TEXTS)
async def test_a_hostile_text_is_said_at_its_line_by_every_studio_call(web: Web, what: str) -> None:
    text, line, says = TEXTS[what]
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        checked = await c.post(
            "/studio/api/check",
            content=json.dumps({"name": "basics.yaml", "text": text}),
            headers=who,
        )
        assert checked.status_code == 200, checked.text[:300]
        problems = checked.json()["problems"]
        assert any(says in p["message"] and (line == 0 or p["line"] == line) for p in problems), (
            problems
        )

        page = await c.get("/studio/edit/basics.yaml", headers=who)
        version = (
            page.text.split('data-version="', 1)[-1].split('"', 1)[0]
            if 'data-version="' in page.text
            else ""
        )
        saved = await c.post(
            "/studio/api/save",
            content=json.dumps({"name": "basics.yaml", "text": text, "version": version}),
            headers=who,
        )
        assert saved.status_code == 422 and saved.json()["ok"] is False, saved.text[:300]
        assert any(says in p["message"] for p in saved.json()["problems"]), saved.text[:300]
        assert (web.bank / "basics.yaml").read_text() == QUESTION  # learners keep the set

        for url, body in {
            "/studio/api/run": {
                "name": "basics.yaml",
                "text": text,
                "question_id": "mc-half-dtype",
            },
            "/studio/api/distractors": {
                "name": "basics.yaml",
                "text": text,
                "question_id": "mc-half-dtype",
            },
            "/studio/api/use-output": {
                "name": "basics.yaml",
                "text": text,
                "question_id": "mc-half-dtype",
                "output": "1",
            },
            "/studio/api/add-question": {"text": text, "question_id": "new-one"},
            "/studio/api/add-choice": {
                "text": text,
                "question_id": "mc-half-dtype",
                "choice_text": "x",
                "why": "y",
            },
        }.items():
            r = await c.post(url, content=json.dumps(body), headers=who)
            assert r.status_code in (200, 400, 404, 422), (url, r.status_code, r.text[:300])
            assert r.status_code == 200 or r.json()["error"], (url, r.text[:300])
        preview = await c.post("/studio/preview", data={"name": "basics.yaml", "text": text, "question_id": "mc-half-dtype"},
                               headers={"cookie": who["cookie"]})  # fmt: skip
        assert preview.status_code == 400, preview.status_code


@pytest.mark.parametrize("name", ["x.yaml\n", "x.yml", "basics.yml", "X.yaml"])
async def test_a_file_name_not_in_the_one_form_is_refused_everywhere(web: Web, name: str) -> None:
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = as_instructor(await studio_session(c, "ada"))
        made = await c.post("/studio/new-set", data={"name": name, "title": "T"}, headers=who)
        assert made.status_code == 400 and "lowercase words joined by" in made.text, (
            made.status_code,
            made.text[:300],
        )
        api = {**who, "content-type": "application/json"}
        saved = await c.post(
            "/studio/api/save",
            content=json.dumps({"name": name, "text": "title: T\n", "version": ""}),
            headers=api,
        )
        assert saved.status_code == 400 and "lowercase words joined by" in saved.json()["error"], (
            saved.text[:300]
        )
        assert sorted(p.name for p in web.bank.iterdir()) == ["basics.yaml", "broken.yaml"]


async def test_a_hostile_file_in_the_folder_is_said_when_opened(web: Web) -> None:
    (web.bank / "folder.yaml").mkdir()
    (web.bank / "latin.yaml").write_bytes(b"title: caf\xe9\n")
    (web.bank / "link.yaml").symlink_to(web.bank / "basics.yaml")
    (web.bank / "huge.yaml").write_text("#" * (SET_FILE_BYTES + 10))
    os.mkfifo(web.bank / "pipe.yaml")
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = as_instructor(await studio_session(c, "ada"))
        for name, says in [("folder.yaml", "a folder, not a file"), ("latin.yaml", "UTF-8"), ("link.yaml", "link"),
                           ("huge.yaml", "KiB"), ("pipe.yaml", "not a plain file")]:  # fmt: skip
            page = await c.get(f"/studio/edit/{name}", headers=who)
            assert page.status_code == 400 and says in page.text, (
                name,
                page.status_code,
                page.text[-600:],
            )
        home = await c.get("/studio", headers=who)
        assert home.status_code == 200


async def test_a_text_that_is_not_unicode_is_refused_not_written(web: Web) -> None:
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        body = json.dumps({"name": "draft-one.yaml", "text": "title: t \ud800\n", "version": ""})
        saved = await c.post("/studio/api/save", content=body, headers=who)
        assert saved.status_code == 400 and "not Unicode text" in saved.json()["error"], saved.text[
            :300
        ]
        assert not (web.bank / "draft-one.yaml").exists()
