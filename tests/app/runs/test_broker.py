"""The broker as compose.yaml runs it: `nats-server` with the committed deploy/nats.conf, users
and per-role permissions (`tests.support.nats`). Nobody connects without credentials, `serve`
and `worker` refuse to go without them, and each role may do only what it does: the web
publishes runs and reads results, a worker the reverse."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import nats.errors
import pytest
import yaml

from app.runs.remote import RemoteRuns
from app.settings import Settings
from tests.support.cli import REPO
from tests.support.nats import NATS_CONF, AuthenticatedNats, authenticated_nats
from tests.support.server import Server
from tests.support.workers import WORKERS_KEY, WorkerProcess

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthenticatedNats]:
    with authenticated_nats(tmp_path_factory.mktemp("nats")) as server:
        yield server


def broker_env(url: str) -> dict[str, str]:
    """What a web or a worker is given to reach this broker (and nothing saying it may go without)."""
    return {"AMPQUIZ_WORKERS_URL": url, "AMPQUIZ_WORKERS_KEY": WORKERS_KEY}


def without_insecure() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "AMPQUIZ_BROKER_INSECURE"}


@pytest.mark.parametrize("command", [["worker"], ["serve", "--processes", "1"]])
def test_serve_and_worker_refuse_a_broker_url_without_credentials(
    broker: AuthenticatedNats, command: list[str], tmp_path: Path
) -> None:
    env = {**without_insecure(), "PYTHONPATH": str(REPO), **broker_env(broker.url()),
           "AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path / 'ampquiz.db'}"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "app.cli", *command], env=env, check=False, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "no credentials" in done.stderr and "AMPQUIZ_BROKER_INSECURE=1" in done.stderr, (
        done.stderr
    )


def test_with_credentials_serve_and_a_worker_run_code_and_say_the_broker_is_authenticated(
    broker: AuthenticatedNats, tmp_path: Path
) -> None:
    (tmp_path / "web-host").mkdir()
    web = Server(tmp_path / "web-host")
    web.env = {**without_insecure(), **{k: v for k, v in web.env.items() if k != "AMPQUIZ_BROKER_INSECURE"},
               **broker_env(broker.url("web")), "AMPQUIZ_SECRET_KEY": secrets.token_urlsafe(32)}  # fmt: skip
    worker = None
    try:
        web.start(healthy=False)  # it made the queue; no worker yet
        worker = WorkerProcess(tmp_path / "worker-host", env=broker_env(broker.url("worker")))
        deadline = time.monotonic() + 90
        with httpx.Client(base_url=web.url, timeout=30) as c:
            while not (health := c.get("/healthz").json())["ok"]:
                assert time.monotonic() < deadline, (health, worker.log.read_text()[-2000:])
                time.sleep(0.3)
            run = c.post("/api/run", json={"code": "print('authenticated')"}).json()["run"]
        listed = subprocess.run([sys.executable, "-m", "app.cli", "workers"], check=False, capture_output=True,
                                text=True, timeout=60, cwd=REPO,
                                env={**without_insecure(), **broker_env(broker.url("web"))})  # fmt: skip
    finally:
        web.stop()
        if worker is not None:
            worker.stop()
    assert (run["status"], run["stdout"]) == ("ok", "authenticated\n")
    assert health["sandbox"]["broker"] == {"authenticated": True, "insecure": False}
    assert "@" not in health["sandbox"]["url"] and broker.passwords["web"] not in str(health)
    assert listed.returncode == 0 and " slots busy" in listed.stdout, listed.stdout + listed.stderr
    assert "(delivery 1)" in worker.log.read_text()


async def _as(broker: AuthenticatedNats, role: str, refused: list[str]) -> Any:
    async def said(error: Exception) -> None:
        refused.append(str(error))

    return await nats.connect(
        broker.url(role), error_cb=said, inbox_prefix=f"_INBOX.{role}", allow_reconnect=False
    )


async def test_each_role_may_do_only_what_its_role_does(broker: AuthenticatedNats) -> None:
    settings = Settings(workers_url=broker.url("web"), workers_key=WORKERS_KEY)
    web = await RemoteRuns.connect(broker.url("web"), settings, discover_s=0.1)  # makes the queue
    refused: dict[str, list[str]] = {"web": [], "worker": []}
    as_web, as_worker = (
        await _as(broker, "web", refused["web"]),
        await _as(broker, "worker", refused["worker"]),
    )
    heard: list[Any] = []

    async def took(msg: Any) -> None:
        heard.append(msg)

    try:
        await as_worker.publish("ampquiz.runs.cpu", b"{}")  # a worker publishes no run
        await as_worker.publish("ampquiz.workers.ping", b"")
        await as_worker.subscribe("ampquiz.results.*", cb=took)  # nor reads any result
        await as_worker.subscribe("_INBOX.web.>", cb=took)  # nor what the web is answered
        await as_worker.publish(
            "$JS.API.STREAM.DELETE.AMPQUIZ_RUNS_cpu", b""
        )  # nor unmakes the queue
        await as_web.publish(web.results_subject, b"{}")  # the web publishes no result
        await as_web.publish("ampquiz.workers.status", b"{}")  # nor announces a worker
        await as_web.subscribe("ampquiz.runs.cpu", cb=took)  # nor reads the runs as they go
        await as_web.publish(
            "$JS.API.CONSUMER.MSG.NEXT.AMPQUIZ_RUNS_cpu.runs-cpu", b"1"
        )  # nor takes one
        await as_web.subscribe("_INBOX.worker.>", cb=took)
        for nc in (as_web, as_worker):
            await nc.flush()
        await asyncio.sleep(0.5)
        info = await web.js.stream_info("AMPQUIZ_RUNS_cpu")
    finally:
        for nc in (as_web, as_worker):
            await nc.close()
        await web.close()
    said = {role: "\n".join(errors).lower() for role, errors in refused.items()}
    for role, subject in [
        ("worker", "publish to \"ampquiz.runs.cpu\""), ("worker", "publish to \"ampquiz.workers.ping\""),
        ("worker", "subscription to \"ampquiz.results.*\""), ("worker", "subscription to \"_inbox.web.>\""),
        ("worker", "publish to \"$js.api.stream.delete.ampquiz_runs_cpu\""),
        ("web", f"publish to \"{web.results_subject}\""), ("web", "publish to \"ampquiz.workers.status\""),
        ("web", "subscription to \"ampquiz.runs.cpu\""), ("web", "subscription to \"_inbox.worker.>\""),
        ("web", "publish to \"$js.api.consumer.msg.next.ampquiz_runs_cpu.runs-cpu\""),
    ]:  # fmt: skip
        assert f"permissions violation for {subject}" in said[role], (role, subject, said[role])
    assert heard == [] and info.state.messages == 0


@pytest.mark.parametrize("password", [None, "not-the-password"])
async def test_nobody_connects_without_a_role_s_password(
    broker: AuthenticatedNats, password: str | None
) -> None:
    url = broker.url("web", password=password) if password else broker.url()
    said: list[str] = []

    async def error(exc: Exception) -> None:
        said.append(str(exc))

    with pytest.raises((nats.errors.Error, OSError)) as refused:
        await nats.connect(
            url, allow_reconnect=False, max_reconnect_attempts=1, connect_timeout=3, error_cb=error
        )
    assert "authorization violation" in (str(refused.value) + " ".join(said)).lower(), (
        refused.value,
        said,
    )


def test_compose_runs_the_tested_configuration_and_gives_each_role_its_own_password() -> None:
    """What compose.yaml runs is what these tests ran: deploy/nats.conf, each password it reads
    from the environment required there (compose refuses to start without it), and the web and
    the worker each connecting as their own user with their own."""
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    conf = NATS_CONF.read_text()
    wanted = set(re.findall(r"\$(AMPQUIZ_[A-Z_]+)", conf))
    assert wanted == {"AMPQUIZ_NATS_WEB_PASSWORD", "AMPQUIZ_NATS_WORKER_PASSWORD"}
    nats_service = compose["nats"]
    mounted = [v.split(":") for v in nats_service["volumes"]]
    assert [(host, inside) for host, inside, *_ in mounted] == [
        ("./deploy/nats.conf", nats_service["command"][-1])
    ]
    for name in wanted:
        assert nats_service["environment"][name].startswith(f"${{{name}:?"), name
    for role in ("web", "worker"):
        url = compose[role]["environment"]["AMPQUIZ_WORKERS_URL"]
        assert re.fullmatch(
            rf"nats://{role}:\$\{{AMPQUIZ_NATS_{role.upper()}_PASSWORD:\?[^}}]+\}}@nats:4222", url
        ), url
        assert "AMPQUIZ_BROKER_INSECURE" not in compose[role]["environment"]
