"""The app on PostgreSQL (`AMPQUIZ_DATABASE_URL`): attempts, progress and review times hold there too.

Uses the PostgreSQL server on this machine (loopback, trust auth; `AMPQUIZ_TEST_POSTGRES` names
another) with a database made for each test and dropped after it. That database's sessions run in
New York time, so a timestamp stored or read as local time instead of UTC shows up as a review
that comes due hours early or late.
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.support.postgres import drop_connections
from tests.support.web import Web, shown_at

pytestmark = pytest.mark.anyio

SECRET = "k" * 40  # the secret key file lives next to a SQLite file; on PostgreSQL it is configured


async def test_progress_survives_a_restart_on_postgres(web: Web, postgres_url: str) -> None:
    on_postgres = {"database_url": postgres_url, "secret_key": SECRET}
    async with web.client(**on_postgres) as c:
        assert (await c.get("/healthz")).json()["database"] is True
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 0)},
        )
        await c.post(
            "/api/questions/po-linear-dtype/attempts?run=false",
            json={"output": "torch.bfloat16 torch.Size([1, 2])"},
        )
        cookies = c.cookies

    async with web.client(cookies=cookies, **on_postgres) as c:  # a new app on the same database
        progress = (await c.get("/api/progress")).json()
        assert progress["totals"]["attempts"] == 2 and progress["totals"]["right"] == 1
        assert [h["question_id"] for h in progress["history"]] == [
            "po-linear-dtype",
            "mc-half-dtype",
        ]
        assert [r["question_id"] for r in progress["review"]] == ["mc-half-dtype"]
    assert not web.db.exists()  # nothing went to the SQLite default

    engine = create_engine(postgres_url)
    with engine.connect() as conn:  # the rows really are in PostgreSQL
        assert conn.execute(text("SELECT count(*) FROM attempt")).scalar_one() == 2
    engine.dispose()


async def test_reviews_come_due_on_time_on_postgres(web: Web, postgres_url: str) -> None:
    async with web.client(database_url=postgres_url, secret_key=SECRET) as c:
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 0)},
        )
        again = await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 1)},
        )
        assert again.json()["recorded"] is False  # the key just shown: practice
        assert (await c.get("/api/questions/mc-half-dtype")).json()["status"] == "wrong"
        web.clock.advance(minutes=30)
        assert (await c.get("/api/questions/mc-half-dtype")).json()["status"] == "due"
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 1)},
        )
        review = (await c.get("/api/progress")).json()["review"]
        assert review[0]["is_due"] is False and "day" in review[0]["due_in"]


async def test_a_dropped_database_connection_costs_a_learner_nothing(
    web: Web, postgres_url: str
) -> None:
    """The pool does not ping a connection before each use (a round trip per request): when the
    server drops them all (a restart, an administrator), the next request still answers, on a
    fresh connection."""
    async with web.client(database_url=postgres_url, secret_key=SECRET) as c:
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 0)},
        )
        assert (
            drop_connections(postgres_url) >= 1
        )  # the app's pooled connection was there, and is gone
        answered = await c.post(
            "/api/questions/po-linear-dtype/attempts?run=false", json={"output": "x"}
        )
        assert answered.status_code == 200
        progress = await c.get("/progress")
        assert progress.status_code == 200
        assert (await c.get("/api/progress")).json()["totals"]["attempts"] == 2


async def test_health_says_when_the_database_is_gone(web: Web, postgres_url: str) -> None:
    """A load balancer asking /healthz hears 503 with `database: false` when the database cannot
    be reached (here: dropped under the running app); a learner gets a page, and a program the
    API's error shape, that say so and to try again (503, Retry-After), not "something went wrong"."""
    async with web.client(database_url=postgres_url, secret_key=SECRET) as c:
        assert (await c.get("/healthz")).json()["database"] is True
        assert (await c.head("/healthz")).status_code == 200  # a load balancer may ask with HEAD
        admin = create_engine(
            make_url(postgres_url).set(database="postgres"), isolation_level="AUTOCOMMIT"
        )
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{make_url(postgres_url).database}" WITH (FORCE)'))
        admin.dispose()
        health = await c.get("/healthz")
        assert health.status_code == 503 and (await c.head("/healthz")).status_code == 503
        assert health.json()["database"] is False and health.json()["ok"] is False
        page = await c.get("/progress")
        assert page.status_code == 503 and page.headers["retry-after"] == "30"
        assert "The database cannot be reached right now" in page.text and "<html" in page.text
        answered = await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false", json={"choices": [0]}
        )
        assert answered.status_code == 503
        assert answered.json() == {"ok": False, "status": 503, "error": (
            "The database cannot be reached right now, so nothing could be read or saved. Please try again in a minute."
        )}  # fmt: skip


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_input_a_database_cannot_store_is_refused_or_not_found_not_a_500(
    web: Web, database: str, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL refuses a text with NUL in it and an id past 32 bits; a moment twelve digits
    long is past the calendar's end. Each was a 500 (on PostgreSQL, or on both)."""
    on = (
        {"database_url": request.getfixturevalue("postgres_url"), "secret_key": SECRET}
        if database == "postgresql"
        else {}
    )
    async with web.client(**on) as c:
        nul = await c.post("/api/questions/po-linear-dtype/attempts?run=false",
                           json={"output": "torch.float32", "submit_id": "x\u0000"})  # fmt: skip
        assert nul.status_code == 422 and nul.json()["ok"] is False
        form = await c.post(
            "/questions/po-linear-dtype", data={"output": "torch.float32", "submit_id": "x\x00"}
        )
        assert form.status_code == 422
        assert (await c.get("/questions/mc-half-dtype?attempt=2147483648")).status_code == 404
        assert (await c.get("/interview/a%00b")).status_code == 404
        assert (await c.post("/interview/a%00b/next")).status_code == 404
        done = await c.get("/review/done?since=999999999999")
        assert done.status_code == 200
        assert (await c.get("/api/progress")).json()["totals"][
            "attempts"
        ] == 0  # nothing half-saved
