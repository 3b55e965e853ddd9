"""The studio's editor text is often half-typed: every studio call on it answers with a sentence
for its author (400, the API's error shape) or a result, never a 500."""

from __future__ import annotations

import json

import pytest

from app import instructors
from tests.support.web import Web, as_instructor, studio_session

pytestmark = pytest.mark.anyio

TEXTS = {
    "half-typed": "title: t\ndescription: d\nquestions:\n  - [\n",
    "a list": "[1, 2]\n",
    "questions a number": "title: t\ndescription: d\nquestions: 5\n",
    "questions of strings": "title: t\ndescription: d\nquestions: [abc]\n",
    "a list as a key": "? [1, 2]\n: x\n",
    "nested deep": "[" * 3000,
    "a lone surrogate": "title: t \ud800\ndescription: d\nquestions: []\n",
    # each level doubles what a walk of the document sees: 2**40 leaves from a few hundred bytes
    "aliases nested": "a0: &a0 [x, x]\n"
    + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, 40)),
}


@pytest.mark.parametrize("what", TEXTS)
async def test_studio_calls_on_half_typed_text_answer_in_words(web: Web, what: str) -> None:
    text = TEXTS[what]
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        calls = {
            "/studio/api/check": {"name": "x.yaml", "text": text},
            "/studio/api/use-output": {
                "name": "x.yaml",
                "text": text,
                "question_id": "q",
                "output": "1",
            },
            "/studio/api/add-question": {"text": text, "question_id": "new-one"},
            "/studio/api/add-choice": {
                "text": text,
                "question_id": "q",
                "choice_text": "x",
                "why": "y",
            },
        }
        for url, body in calls.items():
            r = await c.post(url, content=json.dumps(body), headers=who)
            assert r.status_code in (200, 400, 404, 422), (url, r.status_code, r.text[:300])
            if r.status_code != 200:
                assert r.json()["ok"] is False and r.json()["error"], (url, r.text[:300])
