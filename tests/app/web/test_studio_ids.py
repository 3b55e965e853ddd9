"""The studio's check and Save see the file as the bank would take it: an id used twice in it, or
one another file already serves, leaves the file out whole (set and all), so Save refuses it and
the check says where, as `ampquiz lint` would. And a preview never shows "Right!" for a key its
run contradicts without saying so."""

from __future__ import annotations

import json

import pytest

from app import instructors
from tests.support.studio import version
from tests.support.web import BANK, Web, as_instructor, studio_session

pytestmark = pytest.mark.anyio

OTHER = (
    BANK["basics.yaml"].split("questions:")[0].replace("title:", "title: Other", 1)
    + """questions:
  - id: mc-half-dtype
    kind: multiple_choice
    topic: dtypes
    difficulty: 1
    prompt: Reused id.
    choices:
      - {text: a, correct: true, why: w}
      - {text: b, correct: false, why: w}
    explanation: E
    source: tests
"""
)


async def test_an_id_another_file_serves_is_refused_and_nothing_is_lost(web: Web) -> None:
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        checked = (
            await c.post(
                "/studio/api/check",
                content=json.dumps({"name": "other.yaml", "text": OTHER}),
                headers=who,
            )
        ).json()
        assert any(
            "'mc-half-dtype' is taken (by basics.yaml:" in p["message"] for p in checked["problems"]
        ), checked
        saved = await c.post(
            "/studio/api/save",
            content=json.dumps({"name": "other.yaml", "text": OTHER, "version": ""}),
            headers=who,
        )
        assert saved.status_code == 422 and saved.json()["ok"] is False, saved.text
        assert not (web.bank / "other.yaml").exists()
        assert (
            await c.get("/questions/mc-half-dtype")
        ).status_code == 200  # the set it belongs to is still served

        twice = OTHER.replace("mc-half-dtype", "brand-new") + OTHER.split("questions:\n")[
            1
        ].replace("mc-half-dtype", "brand-new")
        checked = (
            await c.post(
                "/studio/api/check",
                content=json.dumps({"name": "other.yaml", "text": twice}),
                headers=who,
            )
        ).json()
        assert any("duplicate id 'brand-new'" in p["message"] for p in checked["problems"]), checked

        own = BANK["basics.yaml"]  # the file's own ids are its own: saving it as it is works
        saved = await c.post(
            "/studio/api/save",
            content=json.dumps(
                {"name": "basics.yaml", "text": own, "version": version(web.bank / "basics.yaml")}
            ),
            headers=who,
        )
        assert saved.status_code == 200 and saved.json()["ok"] is True, saved.text


async def test_a_preview_after_a_right_answer_says_when_the_run_contradicts_the_key(
    web: Web,
) -> None:
    wrong = BANK["basics.yaml"].replace(
        "answer: torch.bfloat16 torch.Size([1, 2])", "answer: torch.float16 torch.Size([1, 2])"
    )
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = as_instructor(await studio_session(c, "ada"))
        for text, contradicted in ((wrong, True), (BANK["basics.yaml"], False)):
            shown = await c.post("/studio/preview", data={"name": "basics.yaml", "text": text, "question_id": "po-linear-dtype",
                                                          "answered": "true"}, headers=who)  # fmt: skip
            assert shown.status_code == 200, shown.text[:300]
            assert ("data-key-problem" in shown.text) == contradicted


async def test_a_large_set_file_is_read_up_to_the_studios_own_limit_and_refused_in_its_words(
    web: Web,
) -> None:
    """The snippet-sized body limit (about 240 KB) refused a 300 KB set file the studio accepts,
    saying "code is limited to 20000 bytes"."""
    big = BANK["basics.yaml"] + "# " + "x" * 300_000 + "\n"
    huge = BANK["basics.yaml"] + "# " + "x" * 600_000 + "\n"
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        read = await c.post(
            "/studio/api/check",
            content=json.dumps({"name": "basics.yaml", "text": big}),
            headers=who,
        )
        assert read.status_code == 200 and read.json()["problems"] == [], read.text[:300]
        refused = await c.post(
            "/studio/api/check",
            content=json.dumps({"name": "basics.yaml", "text": huge}),
            headers=who,
        )
        assert refused.status_code in (400, 413) and "512 KiB" in refused.json()["error"], (
            refused.text[:300]
        )
        escaped = await c.post(
            "/studio/api/check",
            content=json.dumps({"name": "basics.yaml", "text": "é" * 600_000}),
            headers=who,
        )
        assert escaped.status_code in (400, 413) and "512 KiB" in escaped.json()["error"], (
            escaped.text[:300]
        )


async def test_the_editor_shows_what_lint_warns_about_and_still_saves(web: Web) -> None:
    """A choice whose words say another thing than its outcome: the editor's check shows lint's
    warning at the question's line, and the file still saves (a warning is not a problem)."""
    from tests.app.bank.test_load import SWAPPED

    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        checked = (
            await c.post(
                "/studio/api/check",
                content=json.dumps({"name": "swapped.yaml", "text": SWAPPED}),
                headers=who,
            )
        ).json()
        assert {"line": 4, "col": 5, "message": "warning: [swapped-texts] choice 1's text names float32, but its outcome prints "
                "bfloat16: does the text say what the run does?"} in checked["problems"], checked  # fmt: skip
        saved = await c.post(
            "/studio/api/save",
            content=json.dumps({"name": "swapped.yaml", "text": SWAPPED, "version": ""}),
            headers=who,
        )
        assert saved.status_code == 200 and saved.json()["ok"] is True, saved.text
