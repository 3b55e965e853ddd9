"""The web tier as a deployment runs it: `ampquiz serve --processes 2` on PostgreSQL, with no
sandbox of its own, answering, grading and showing runs from a remote `ampquiz worker`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.processes import children, cmdline, web_processes
from tests.support.server import Server
from tests.support.web import positions
from tests.support.workers import WORKERS_ENV, WorkerProcess, reset_stream


@pytest.fixture
def deployment(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Server, WorkerProcess]]:
    asyncio.run(reset_stream())
    web = Server(tmp_path, args=("--processes", "2"))
    web.env.update(
        {
            **WORKERS_ENV,
            "AMPQUIZ_DATABASE_URL": postgres_url,
            "AMPQUIZ_SECRET_KEY": "tests-secret-key-of-the-right-length-0123456789",
        }
    )
    worker = None
    try:
        web.start(healthy=False)  # no worker online yet: up, but it cannot run code
        health = httpx.get(web.url + "/healthz", timeout=10)
        assert health.status_code == 503 and health.json()["sandbox"]["workers"] == []
        worker = WorkerProcess(tmp_path / "worker-host", slots=2)  # comes online after the web
        yield web, worker
    finally:
        web.stop()
        if worker is not None:
            worker.stop()


def test_two_web_processes_on_postgres_grade_and_show_remote_runs(
    deployment: tuple[Server, WorkerProcess],
) -> None:
    server, _worker = deployment
    with httpx.Client(base_url=server.url, timeout=30) as c:
        deadline = time.monotonic() + 90
        while (health := c.get("/healthz").json())["sandbox"].get("workers") == [] or not health[
            "ok"
        ]:
            assert time.monotonic() < deadline, health
            time.sleep(0.3)
        assert health["sandbox"]["kind"] == "remote" and health["sandbox"]["devices"] == ["cpu"]
        # The shared NATS server of the tests has no users: allowed (AMPQUIZ_BROKER_INSECURE), and said.
        assert health["sandbox"]["broker"] == {"authenticated": False, "insecure": True}
        assert health["database"] is True
        # Two web processes, and they started no sandbox: no zygote among them, every run on the
        # worker. (Waited for: the first healthy answer can come while uvicorn replaces a process
        # that missed its 5 s health ping on a loaded host; its log says so when it does.)
        while len(web_processes(server.proc.pid)) != 2:
            assert time.monotonic() < deadline, server.log.read_text()[-3000:]
            time.sleep(0.3)
        everything = children(server.proc.pid) + [
            c for p in children(server.proc.pid) for c in children(p)
        ]
        assert not any("sandbox.zygote" in cmdline(p) for p in everything)

        run = c.post(
            "/api/run", json={"code": "import torch\nprint(torch.ones(2, 2).sum().item())"}
        ).json()["run"]
        assert (run["status"], run["stdout"]) == ("ok", "4.0\n")

        while (proof := c.get("/api/questions/gradscaler-skips-inf-step").json()["proof"])[
            "state"
        ] != "proved":
            assert time.monotonic() < deadline, (
                proof
            )  # by the committed CPU record or a run on the worker
            time.sleep(0.3)
        shown = c.get("/api/questions/gradscaler-skips-inf-step").json()["choices"]
        right = positions(
            shown, "gradscaler-skips-inf-step", 0
        )  # the bank's first choice is its key
        answer = c.post(
            "/api/questions/gradscaler-skips-inf-step/attempts", json={"choices": right}
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["correct"] is True
        assert body["run"]["stdout"] == "1.0 32768.0\n"  # the question's run, from the worker
        assert body["run"]["environment"]["device_kind"] == "cpu"
        progress = c.get("/api/progress").json()
        assert progress["totals"]["attempts"] == 1  # stored in PostgreSQL, read back by any process
