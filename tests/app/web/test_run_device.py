"""Choosing where a run goes: `device` on POST /api/run and the playground's device picker."""

from __future__ import annotations

import re

import pytest

from tests.support.web import Web

pytestmark = pytest.mark.anyio
ASKS_CUDA = "import torch\nprint(torch.cuda.get_device_name())"


async def test_the_api_runs_where_it_is_told_and_refuses_what_is_not_here(web: Web) -> None:
    async with web.client() as c:
        health = (await c.get("/healthz")).json()
        assert health["sandbox"]["devices"] == ["cpu"]  # this host has no GPU
        cpu = (
            await c.post(
                "/api/run",
                json={"code": "import torch\nprint(torch.ones(1).device)", "device": "cpu"},
            )
        ).json()
        assert cpu["run"]["stdout"] == "cpu\n"
        cuda = (await c.post("/api/run", json={"code": ASKS_CUDA, "device": "cuda"})).json()
        assert cuda["run"]["status"] == "unavailable"
        assert "needs a CUDA GPU" in cuda["run"]["message"]
        bad = await c.post("/api/run", json={"code": "print(1)", "device": "tpu"})
        assert bad.status_code == 422 and bad.json()["ok"] is False


async def test_the_playground_offers_the_devices_and_keeps_the_choice(web: Web) -> None:
    async with web.client() as c:
        page = (await c.get("/run")).text
        assert re.search(r'<option value="cuda"[^>]*>CUDA \(none online\)</option>', page)
        assert re.search(r'<option value="cpu"[^>]*>CPU</option>', page)
        ran = await c.post("/run", data={"code": ASKS_CUDA, "device": "cuda"})
        assert "needs a CUDA GPU" in ran.text
        assert re.search(
            r'<option value="cuda" selected', ran.text
        )  # the choice survives the round trip
        # Offered only when something could run it (a newcomer's walk picked it and got "not run");
        # kept choosable when it is the code's own choice, so the run says plainly that none is
        # online, where sent to the CPU the code would fail on its first .cuda().
        assert re.search(r'<option value="cuda"\s+disabled>', page)
        assert re.search(r'<option value="cuda" selected\s*>', ran.text)
        panel = await c.post("/run/panel", data={"code": "print(5)", "device": "cpu"})
        assert "5" in panel.text and panel.status_code == 200
