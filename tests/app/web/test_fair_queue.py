"""One client cannot take the sandbox from everyone else: each learner and address has a share of
the run queue, and the runs shown with answered questions never wait behind playground runs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from tests.support.web import Web, shown_at

pytestmark = pytest.mark.anyio

SLOW = "import time\ntime.sleep(2)\nprint('slow')\n"


async def in_flight(c: httpx.AsyncClient, n: int) -> None:
    for _ in range(300):
        if (await c.get("/healthz")).json()["sandbox"]["in_flight"] >= n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never {n} runs in flight")


async def test_a_flooding_client_gets_its_share_and_others_are_served(web: Web) -> None:
    async with web.client() as flooder:
        other = httpx.AsyncClient(
            transport=flooder._transport, base_url="http://testserver"
        )  # another learner
        await flooder.get("/")  # a browser: it has its learner cookie before it floods
        flood = [
            asyncio.create_task(flooder.post("/api/run", json={"code": SLOW})) for _ in range(8)
        ]
        await in_flight(flooder, 2)
        await asyncio.sleep(0.2)
        refused = [r for r in [t.result() for t in flood if t.done()] if r.status_code == 429]
        assert len(refused) == 6  # two runs are theirs to have; the rest are refused at once
        assert "You already have 2 runs going" in refused[0].json()["error"]
        assert int(refused[0].headers["retry-after"]) >= 1
        # another learner still runs code, and gets the run of the question they answer
        mine = await other.post("/api/run", json={"code": "print(42)"})
        assert mine.status_code == 200 and mine.json()["run"]["stdout"] == "42\n"
        answer = await other.post("/api/questions/po-linear-dtype/attempts", json={"output": "x"})
        assert answer.status_code == 200 and answer.json()["run"]["status"] == "ok"
        await asyncio.gather(*flood)
        await other.aclose()


async def test_a_question_run_goes_before_waiting_playground_runs(web: Web) -> None:
    async with web.client(proved=True, run_per_learner=10) as c:
        busy = [asyncio.create_task(c.post("/api/run", json={"code": SLOW})) for _ in range(4)]
        await in_flight(c, 4)  # two running, two waiting
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = await c.post(
            "/api/questions/mc-half-dtype/attempts",
            json={"choices": await shown_at(c, "mc-half-dtype", 1)},
        )
        took = loop.time() - started
        assert answer.json()["run"]["stdout"] == "torch.float16\n"
        # it took the first worker to come free (about 2 s), not the 4 s the waiting runs needed
        assert took < 3.5, took
        finished = [t for t in busy if t.done()]
        assert len(finished) <= 2
        await asyncio.gather(*busy)


async def test_a_client_that_drops_its_cookie_is_still_one_address(web: Web) -> None:
    async with web.client(run_per_address=3) as c:
        fresh = [
            httpx.AsyncClient(transport=c._transport, base_url="http://testserver")
            for _ in range(6)
        ]
        flood = [asyncio.create_task(f.post("/api/run", json={"code": SLOW})) for f in fresh]
        await in_flight(c, 3)
        await asyncio.sleep(0.2)
        refused = [t.result() for t in flood if t.done() and t.result().status_code == 429]
        assert (
            len(refused) == 3
            and "Your network already has 3 runs going" in refused[0].json()["error"]
        )
        await asyncio.gather(*flood)
        for f in fresh:
            await f.aclose()


BIG = """\
import torch
x = torch.ones(3, 3)
for i in range(400):
    x = (x * 1.0001 + i).clamp(-1e6, 1e6).relu().sqrt().exp().log().tanh()
    y = torch.ones(i % 7 + 1, 3) @ x  # a new shape each time: a new row in the trace
print(x.sum().item() > 0)
"""


async def test_health_is_answered_while_a_large_run_is_being_rendered(
    web: Web, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The largest explanation a run can carry is rendered off the event loop: /healthz (what a
    load balancer asks) is answered while such a panel is in the middle of rendering. The panel's
    rendering waits, wherever it runs, until a /healthz asked after it began has been answered:
    on the event loop that answer could never come (the wait gives up after 60 s, and the test
    fails). Nothing here depends on how fast this host is at the time."""
    async with web.client(run_per_learner=10) as c:
        first = await c.post("/run/panel", data={"code": BIG, "explain": "true"})
        assert first.status_code == 200 and "Op trace" in first.text
        panel = c.app.state.web.templates.get_template("_run_panel.html")  # type: ignore[attr-defined]
        render = panel.render
        rendering, health_answered = threading.Event(), threading.Event()
        answered_mid_render: list[bool] = []

        def render_once_health_is_answered(*args: Any, **kwargs: Any) -> str:
            rendering.set()
            answered_mid_render.append(health_answered.wait(60))
            return render(*args, **kwargs)

        monkeypatch.setattr(panel, "render", render_once_health_is_answered)

        async def ping_mid_render() -> None:
            await asyncio.to_thread(rendering.wait, 60)
            assert (await c.get("/healthz")).status_code == 200
            health_answered.set()

        shown, _ = await asyncio.gather(
            c.post("/run/panel", data={"code": BIG, "explain": "true"}), ping_mid_render()
        )
        assert shown.status_code == 200 and "Op trace" in shown.text
        assert answered_mid_render == [True], "/healthz was not answered while the panel rendered"


async def test_a_newcomer_waits_for_a_worker_not_for_another_addresss_queue(web: Web) -> None:
    """One address (a fresh cookie per run, within its share) queues long runs; a learner from
    another address waits for the next worker to come free, not for all of those runs."""
    async with web.client(run_per_address=8) as c:
        at = lambda address: httpx.AsyncClient(
            transport=httpx.ASGITransport(app=c.app, client=(address, 1234)),
            base_url="http://testserver",  # type: ignore[attr-defined]
        )
        flooders = [at("10.0.0.1") for _ in range(6)]
        flood = [asyncio.create_task(f.post("/api/run", json={"code": SLOW})) for f in flooders]
        await in_flight(c, 6)  # two running, four waiting
        newcomer = at("10.0.0.2")
        loop = asyncio.get_running_loop()
        started = loop.time()
        mine = await newcomer.post("/api/run", json={"code": "print(42)"})
        took = loop.time() - started
        assert mine.status_code == 200 and mine.json()["run"]["stdout"] == "42\n"
        # the first worker to come free (about 2 s), not after the four waiting runs (6 s)
        assert took < 3.5, took
        assert sum(t.done() for t in flood) <= 2
        await asyncio.gather(*flood)
        for client in (*flooders, newcomer):
            await client.aclose()
