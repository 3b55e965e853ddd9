"""A question's run is kept in the database: another web process of the server, or the server
after a restart, shows the same run instead of running the code again."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from tests.support.web import Web

pytestmark = pytest.mark.anyio


async def test_a_question_run_is_made_once_for_every_process_and_restart(web: Web) -> None:
    async with web.client() as c:
        first = (
            await c.post("/api/questions/po-linear-dtype/attempts", json={"output": "x"})
        ).json()["run"]
    async with web.client() as c:  # a new app on the same database: a second process, or a restart
        again = (
            await c.post("/api/questions/po-linear-dtype/attempts", json={"output": "x"})
        ).json()["run"]
    assert first["status"] == "ok" and first["stdout"] == "torch.bfloat16 torch.Size([1, 2])\n"
    # A fresh run would have taken its own time to the microsecond: this one is the kept one.
    assert again["duration_ms"] == first["duration_ms"] and again == first
    engine = create_engine(f"sqlite:///{web.db}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM question_run")).scalar() >= 1
    engine.dispose()
