"""Every error has one shape: JSON `{"ok": false, "error", "status"}` for the API, a page for people."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from app.web.factory import create_app
from sandbox import Sandbox
from tests.support.web import Web, commit_record, form_at, shown_at

pytestmark = pytest.mark.anyio

SLOW = "import time\ntime.sleep(1.5)\nprint('done')\n"
SLOWER = "import time\ntime.sleep(3)\nprint('done')\n"


def assert_error(response, status: int, fragment: str = "") -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"ok", "error", "status"}
    assert body["ok"] is False and body["status"] == status
    assert fragment in body["error"]


async def test_404_shapes(web: Web) -> None:
    async with web.client() as c:
        assert_error(await c.get("/api/no-such-route"), 404)
        assert_error(await c.get("/api/questions/no-such-question"), 404, "no-such-question")
        assert_error(await c.get("/api/sets/broken"), 404, "broken")
        assert_error(await c.get("/nowhere", headers={"accept": "application/json"}), 404)
        page = await c.get("/nowhere", headers={"accept": "text/html"})
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
        assert "There is no page at this address." in page.text and 'href="/"' in page.text
        page = await c.get("/questions/no-such-question")
        assert page.status_code == 404 and "There is no question" in page.text


async def test_422_shapes(web: Web) -> None:
    async with web.client() as c:
        assert_error(await c.post("/api/run", json={}), 422, "code")
        assert_error(
            await c.post(
                "/api/run", content=b"not json", headers={"content-type": "application/json"}
            ),
            422,
        )
        assert_error(
            await c.post(
                "/api/run", content=b'{"code": "print(1)"}', headers={"content-type": "text/plain"}
            ),
            422,
            "Content-Type: application/json",
        )
        assert_error(
            await c.post("/api/questions/mc-half-dtype/attempts", json={"choices": "one"}),
            422,
            "choices",
        )
        assert_error(await c.get("/api/questions/mc-half-dtype/attempts"), 405)


async def test_413_for_code_over_the_limit(web: Web) -> None:
    async with web.client(max_code_bytes=1000) as c:
        assert_error(
            await c.post("/api/run", json={"code": "x = 1\n" * 200}), 413, "limit is 1000 bytes"
        )
        huge = b'{"code": "' + b"#" * 200_000 + b'"}'
        assert_error(
            await c.post("/api/run", content=huge, headers={"content-type": "application/json"}),
            413,
            "code is limited to 1000 bytes",
        )

        async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"code": "'
            for _ in range(100):
                yield b"#" * 2000
            yield b'"}'

        assert_error(
            await c.post(
                "/api/run", content=streamed(), headers={"content-type": "application/json"}
            ),
            413,
            "code is limited to 1000 bytes",
        )
        page = await c.post("/run", data={"code": "#" * 200_000})
        assert page.status_code == 413 and "code is limited to 1000 bytes" in page.text
        page = await c.post("/run", data={"code": "x = 1\n" * 200})
        assert page.status_code == 413 and "limit is 1000 bytes" in page.text


async def test_429_with_retry_after_when_workers_and_queue_are_full(web: Web) -> None:
    async with web.client(
        run_queue=1, run_per_learner=10
    ) as c:  # the shared pool has 2 workers: 3 runs fit
        slow = [asyncio.create_task(c.post("/api/run", json={"code": SLOW})) for _ in range(3)]
        for _ in range(200):
            if (await c.get("/healthz")).json()["sandbox"]["in_flight"] == 3:
                break
            await asyncio.sleep(0.02)
        refused = await c.post("/api/run", json={"code": "print(1)"})
        assert_error(refused, 429, "Try again in")
        assert int(refused.headers["retry-after"]) >= 1
        panel = await c.post("/run/panel", data={"code": "print(1)"})
        assert panel.status_code == 429 and "Every sandbox worker is busy" in panel.text
        done = await asyncio.gather(*slow)
        assert [r.json()["run"]["stdout"] for r in done] == ["done\n"] * 3
        again = await c.post("/api/run", json={"code": "print(1)"})
        assert again.status_code == 200  # the queue drained


async def test_500_is_an_error_page_not_a_traceback(web: Web) -> None:
    async with web.client() as c:
        with c.app.state.web.store.engine.begin() as db:  # type: ignore[attr-defined]
            db.exec_driver_sql("DROP TABLE review_card")  # the database breaks under the server
        r = await c.get("/api/progress")
        assert_error(r, 500, "went wrong on our side")
        assert "Traceback" not in r.text


@pytest.mark.own_pool
async def test_a_dead_sandbox_is_a_503_and_answers_still_count(web: Web) -> None:
    dead = Sandbox(workers=1).start()
    dead.close()  # a pool whose zygote is gone: every run raises SandboxError
    commit_record(web.bank, dead.environment, ["mc-half-dtype"])  # its key proved by the record
    app = create_app(web.settings(), sandbox=dead, clock=web.clock)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            assert_error(await c.post("/api/run", json={"code": "print(1)"}), 503, "sandbox")
            panel = await c.post("/run/panel", data={"code": "print(1)"})
            assert panel.status_code == 503 and "not working right now" in panel.text
            attempt = await c.post(
                "/api/questions/mc-half-dtype/attempts",
                json={"choices": await shown_at(c, "mc-half-dtype", 1)},
            )
            body = attempt.json()
            assert body["correct"] is True and body["run"] is None
            assert "not working right now" in body["run_message"]
            health = await c.get("/healthz")
            assert health.status_code == 503
            assert health.json()["ok"] is False and health.json()["sandbox"]["alive"] is False


async def test_retry_after_says_when_the_queue_really_has_room(web: Web) -> None:
    """Retry-After comes from the time a run holds its worker, not from how long runs waited in
    the queue (which grows with the very backlog it estimates): told N s, a client finds room
    about then, not minutes later."""

    async def fill() -> list[asyncio.Task]:
        runs = [asyncio.create_task(c.post("/api/run", json={"code": SLOWER})) for _ in range(4)]
        for _ in range(300):
            if (await c.get("/healthz")).json()["sandbox"]["in_flight"] == 4:
                break
            await asyncio.sleep(0.02)
        return runs

    async with web.client(run_queue=2, run_per_learner=10) as c:  # 2 workers + 2 waiting
        await asyncio.gather(*await fill())  # the server learns: half of these waited 3 s first
        slow = await fill()
        refused = await c.post("/api/run", json={"code": "print(1)"})
        told = int(refused.headers["retry-after"])
        started = asyncio.get_running_loop().time()
        while (await c.get("/healthz")).json()["sandbox"]["in_flight"] >= 4:
            await asyncio.sleep(0.05)
        waited = asyncio.get_running_loop().time() - started
        await asyncio.gather(*slow)
        assert abs(told - waited) <= 1.5, (told, waited)  # 3 s runs, two at a time


async def test_forms_posted_from_another_site_are_refused(web: Web) -> None:
    async with web.client() as c:
        evil = {"origin": "https://evil.example"}
        r = await c.post(
            "/questions/mc-half-dtype",
            data={"choice": await form_at(c, "mc-half-dtype", 1)},
            headers=evil,
        )
        assert r.status_code == 403 and "another site" in r.text
        assert_error(
            await c.post("/api/run", json={"code": "print(1)"}, headers=evil), 403, "another site"
        )
        framed = await c.post("/run/panel", data={"code": "print(1)"}, headers={"origin": "null"})
        assert framed.status_code == 403
        no_origin = await c.post(
            "/run", data={"code": "print(1)"}, headers={"sec-fetch-site": "cross-site"}
        )
        assert no_origin.status_code == 403
        assert (await c.get("/api/progress")).json()["totals"]["attempts"] == 0  # nothing recorded
        ours = await c.post(
            "/questions/mc-half-dtype",
            data={"choice": await form_at(c, "mc-half-dtype", 1)},
            headers={"origin": "http://testserver"},
        )
        assert ours.status_code == 303
        assert (
            await c.post("/api/run", json={"code": "print(1)"})
        ).status_code == 200  # a program: no Origin


async def test_docs_carry_the_csp_too(web: Web) -> None:
    async with web.client() as c:
        docs = await c.get("/docs")
        assert docs.status_code == 200 and "<script>" not in docs.text  # no inline script
        csp = docs.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
