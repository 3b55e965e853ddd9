"""A submit id is refused by one rule, in one sentence, whether the API or the answer form sends
it (`app.use_cases.answer.submit_id_problem`); the API's schema still says the rule."""

from __future__ import annotations

import pytest

from app.use_cases.answer import SUBMIT_ID_MOST, submit_id_problem
from tests.support.web import Web

pytestmark = pytest.mark.anyio

TOO_LONG = "x" * (SUBMIT_ID_MOST + 1)
CONTROL = "a\x00b"


def test_the_rule() -> None:
    assert submit_id_problem(None) is None and submit_id_problem("x" * SUBMIT_ID_MOST) is None
    assert submit_id_problem(TOO_LONG) == "String should have at most 64 characters"
    assert submit_id_problem(CONTROL) == "String should match pattern '^[^\\x00-\\x1f\\x7f]*$'"
    assert submit_id_problem(CONTROL + TOO_LONG) == submit_id_problem(TOO_LONG)  # the length first


async def test_the_api_and_the_form_refuse_alike_and_store_nothing(web: Web) -> None:
    async with web.client() as c:
        for bad in (TOO_LONG, CONTROL, "a\x7f"):
            api = await c.post("/api/questions/po-linear-dtype/attempts", json={"output": "x", "submit_id": bad},
                               params={"run": "false"})  # fmt: skip
            form = await c.post("/questions/po-linear-dtype", data={"output": "x", "submit_id": bad},
                                headers={"accept": "application/json"})  # fmt: skip
            assert api.status_code == form.status_code == 422
            said = f"Invalid request: submit_id: {submit_id_problem(bad)}"
            assert api.json()["error"] == form.json()["error"] == said
        store = c.app.state.web.store  # type: ignore[attr-defined]
        assert store.all_attempts() == []
        schema = (await c.get("/openapi.json")).json()["components"]["schemas"]["AnswerIn"][
            "properties"
        ]["submit_id"]
        assert schema["anyOf"][0] == {
            "type": "string",
            "maxLength": 64,
            "pattern": "^[^\\x00-\\x1f\\x7f]*$",
        }
