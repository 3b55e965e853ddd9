"""Remote runs against the real NATS server and real `ampquiz worker` processes.

Each test starts its own workers (a worker is a process with its own sandbox pool) and talks to
them as the web does, through `RemoteRuns`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import nats
import nats.js.errors
import pytest

from app.runs import RunsFull
from app.runs import jetstream as layout
from app.runs.jetstream import Layout
from app.runs.messages import RunRequest
from app.runs.remote import LOST, RemoteRuns
from app.runs.signing import SIGNATURE_HEADER, Signer
from sandbox import Limits
from tests.support.cli import REPO
from tests.support.workers import (
    LAYOUT,
    NATS_SERVER,
    NATS_URL,
    QUICK,
    WORKERS_ENV,
    WORKERS_KEY,
    Start,
    remote_settings,
    status_of,
    until,
)

pytestmark = pytest.mark.anyio


async def test_runs_spread_over_two_workers(web: RemoteRuns, start: Start) -> None:
    workers = await start(2)
    code = "import time, torch\ntime.sleep(0.3)\nprint(torch.ones(3).sum().item())"
    results = await asyncio.gather(*[web.run(code, QUICK) for _ in range(6)])
    assert [r.stdout for r in results] == ["3.0\n"] * 6
    await until(
        lambda: sum(status_of(web, w.id)["done"] for w in workers) == 6
    )  # announced each second
    done = {w.id: status_of(web, w.id)["done"] for w in workers}
    assert all(n >= 1 for n in done.values()), f"one worker did everything: {done}"
    listed = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "app.cli", "workers"], check=False,
                                     env={**os.environ, **WORKERS_ENV}, capture_output=True, text=True, timeout=30, cwd=REPO)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    for w in workers:  # what an operator reads: who, on what, how busy, how many runs
        assert re.search(
            rf"{w.id}: cpu \(.+\), torch 2\.13\.0 · 0/1 slots busy · {done[w.id]} runs, 0 failed",
            listed.stdout,
        )


async def test_a_web_process_s_room_is_its_own_count_of_runs_in_flight(
    web: RemoteRuns, start: Start
) -> None:
    """Each web process counts its own runs in flight (AMPQUIZ_RUN_QUEUE + 64 at most), never what
    the stream holds, which anyone allowed to publish there could fill: one process at its bound
    is refused (429 with Retry-After, from the web), and another goes on."""
    (worker,) = await start(1, slots=1)
    blocker = asyncio.ensure_future(web.run("import time\ntime.sleep(3)", QUICK))
    await until(lambda: status_of(web, worker.id)["busy"] == 1)
    other_process = await RemoteRuns.connect(NATS_URL, remote_settings(), discover_s=0.3)
    try:
        limit = web.settings.run_queue + 64
        assert web.max_in_flight == limit
        waiting = [asyncio.ensure_future(web.run("print(1)", QUICK)) for _ in range(limit - 1)]
        await asyncio.sleep(1)
        with pytest.raises(RunsFull):
            await web.run("print('one too many')", QUICK)
        other = await asyncio.wait_for(other_process.run("print('other')", QUICK), 60)
        assert (other.status, other.stdout) == ("ok", "other\n")
        assert {r.stdout for r in await asyncio.gather(*waiting)} == {
            "1\n"
        }  # the queued ones all ran
        await blocker
    finally:
        await other_process.close()


async def test_a_busy_worker_takes_nothing_new(web: RemoteRuns, start: Start) -> None:
    (worker,) = await start(1, slots=1)
    first = asyncio.ensure_future(web.run("import time\ntime.sleep(2)\nprint(time.time())", QUICK))
    await until(lambda: status_of(web, worker.id)["busy"] == 1)
    second = asyncio.ensure_future(web.run("import time\nprint(time.time())", QUICK))
    await asyncio.sleep(0.3)
    nc = await nats.connect(NATS_SERVER)
    consumer = await nc.jetstream().consumer_info(LAYOUT.stream("cpu"), layout.consumer_name("cpu"))
    await nc.close()
    # The second run waits in the queue, not inside the busy worker.
    assert (consumer.num_ack_pending, consumer.num_pending) == (1, 1)
    first_ended, second_started = float((await first).stdout), float((await second).stdout)
    assert second_started >= first_ended


async def test_a_worker_killed_mid_run_hands_the_run_to_another(
    web: RemoteRuns, start: Start
) -> None:
    workers = await start(2)
    slow = asyncio.ensure_future(web.run("import time\ntime.sleep(4)\nprint('finished')", QUICK))
    await until(lambda: any(status_of(web, w.id)["busy"] for w in workers))
    victim = next(w for w in workers if status_of(web, w.id)["busy"])
    survivor = next(w for w in workers if w is not victim)
    victim.kill()
    others = [web.run(f"print({i})", QUICK) for i in range(4)]  # nothing else is lost meanwhile
    result, *rest = await asyncio.gather(slow, *others)
    assert (result.status, result.stdout) == (
        "ok",
        "finished\n",
    )  # once: one result, from the survivor
    assert [r.stdout for r in rest] == [f"{i}\n" for i in range(4)]
    await until(
        lambda: "(delivery 2)" in survivor.log.read_text()
    )  # it logs once it has acknowledged
    assert web.lost == 0


async def test_a_run_whose_every_worker_dies_is_reported_lost_once(
    web: RemoteRuns, start: Start
) -> None:
    workers = await start(
        3
    )  # all pulling: one takes the run, another its second delivery, never a third
    doomed = asyncio.ensure_future(
        web.run("import time\ntime.sleep(60)", Limits(wall_s=60, cpu_s=60))
    )
    await until(lambda: any(status_of(web, w.id)["busy"] for w in workers))
    first = next(w for w in workers if status_of(web, w.id)["busy"])
    first.kill()
    others = [w for w in workers if w is not first]
    await until(lambda: any(status_of(web, w.id)["busy"] for w in others), timeout=20)
    second = next(w for w in others if status_of(web, w.id)["busy"])
    third = next(w for w in others if w is not second)
    second.kill()
    killed_at = time.monotonic()
    result = await asyncio.wait_for(doomed, 30)
    assert (result.status, result.message) == ("killed", LOST)
    # Told when its holder's lease lapsed on its last delivery (ACK_WAIT_S after the holder's
    # last word), not by the web's slower fallbacks.
    assert time.monotonic() - killed_at < layout.NO_WORKER_GRACE_S
    await asyncio.sleep(1.5)
    assert web.lost == 1  # said once
    assert status_of(web, third.id)["done"] == 0


async def test_a_run_left_with_no_worker_at_all_is_reported_lost(
    web: RemoteRuns, start: Start
) -> None:
    (only,) = await start(1)
    doomed = asyncio.ensure_future(web.run("import time\ntime.sleep(30)", QUICK))
    await until(lambda: status_of(web, only.id)["busy"] == 1)
    only.kill()
    result = await asyncio.wait_for(doomed, layout.NO_WORKER_GRACE_S + 10)
    assert result.status == "killed"
    assert "no CPU worker is online any more" in result.message
    assert web.lost == 1


async def test_workers_told_to_stop_say_goodbye_and_exit_within_seconds(
    web: RemoteRuns, start: Start
) -> None:
    """SIGTERM, as a host being rebooted sends: each worker finishes, says it is leaving (the web
    routes nothing more to it at once) and exits. A slot's connection used to wait 30 s for NATS
    to drain a subscription nobody read (most stops, not all: two workers make a miss unlikely)."""
    workers = await start(2, slots=2)
    assert (await web.run("print(1)", QUICK)).stdout == "1\n"
    began = time.monotonic()
    for worker in workers:
        worker.proc.send_signal(signal.SIGTERM)
    codes = [await asyncio.to_thread(worker.proc.wait, 60) for worker in workers]
    took = time.monotonic() - began
    assert (codes, took < 10) == ([0, 0], True), f"exits {codes} after {took:.1f} s"
    assert not web.online(), web.online()


async def test_a_worker_silent_for_long_is_forgotten_not_kept_forever(
    web: RemoteRuns, start: Start
) -> None:
    """Every restart of a worker is a new id: the web forgets one it has not heard from for
    FORGET_AFTER_S (long after listing it offline), so a web up for months does not keep them all."""
    (alive,) = await start(1)
    web._announced["gone-host-123"] = {**status_of(web, alive.id), "id": "gone-host-123",
                                       "_seen": time.monotonic() - layout.FORGET_AFTER_S - 1}  # fmt: skip
    await until(lambda: "gone-host-123" not in web._announced)
    await asyncio.sleep(1.5)  # the live worker, heard every second, stays
    assert [w["id"] for w in web.online()] == [alive.id]


async def test_cuda_with_only_cpu_workers_online_is_refused_at_once(
    web: RemoteRuns, start: Start
) -> None:
    await start(1)
    started = time.monotonic()
    result = await web.run(
        "import torch\nprint(torch.cuda.get_device_name())", QUICK, device="cuda"
    )
    assert time.monotonic() - started < 1.0
    assert result.status == "unavailable"
    assert "no CUDA worker is online" in result.message
    assert web.devices() == ["cpu"]
    greedy = await asyncio.wait_for(
        web.run("print(1)", Limits(wall_s=3600)), 10
    )  # told at once, not lost later
    assert greedy.status == "unavailable" and "The worker refused this run" in greedy.message


async def test_with_no_worker_online_a_run_is_refused_not_queued(web: RemoteRuns) -> None:
    result = await asyncio.wait_for(web.run("print(1)", QUICK), 1.0)
    assert result.status == "unavailable"
    assert "no sandbox worker is online" in result.message


async def test_a_run_with_a_malformed_deadline_is_dropped_and_the_worker_serves_the_next(
    web: RemoteRuns, start: Start
) -> None:
    (worker,) = await start(1, slots=1)  # one slot: its pull loop must outlive the bad message
    nc = await nats.connect(NATS_SERVER)
    answers: list[object] = []

    async def took(msg: object) -> None:
        answers.append(msg)

    reply, subject = LAYOUT.results_subject("feedfacefeed"), LAYOUT.run_subject("cpu")
    await nc.subscribe(reply, cb=took)
    try:
        body = RunRequest("bad-deadline", "print('ran anyway')", QUICK).encode()
        headers = {layout.REPLY_HEADER: reply, layout.DEADLINE_HEADER: "soon", "Nats-Msg-Id": "bad-deadline",
                   SIGNATURE_HEADER: Signer(WORKERS_KEY).sign("run", subject, "bad-deadline", reply, "soon", body=body)}  # fmt: skip
        await nc.jetstream().publish(
            subject, body, headers=headers
        )  # signed: only the header is wrong
        after = await asyncio.wait_for(web.run("print('next')", QUICK), 20)
        await nc.flush()
    finally:
        await nc.close()
    assert (after.status, after.stdout) == ("ok", "next\n")
    assert answers == []
    assert "run bad-deadline dropped" in worker.log.read_text()
    await until(lambda: status_of(web, worker.id)["done"] == 1)


async def test_another_deployment_on_the_same_nats_server_neither_hears_this_ones_workers_nor_feeds_them(
    web: RemoteRuns, start: Start
) -> None:
    """Deployments sharing a NATS server, each named in its URL (`nats://HOST:PORT/NAME`), even
    with one workers' key: the other's web hears none of this one's workers (its learners are
    told none is online), a run put in the other's queue is never taken by them, and this one's
    runs go on as before."""
    (worker,) = await start(1, slots=1)
    other_url = f"{NATS_SERVER}/other-{uuid.uuid4().hex[:8]}"
    other = await RemoteRuns.connect(other_url, remote_settings(other_url), discover_s=0.5)
    nc = await nats.connect(NATS_SERVER)
    try:
        assert web.online() and other.online() == []
        refused = await asyncio.wait_for(other.run("print(1)", QUICK), 1.0)
        assert refused.status == "unavailable" and "no sandbox worker is online" in refused.message

        theirs = Layout.of(other_url)
        subject, reply, run_id = theirs.run_subject("cpu"), other.results_subject, uuid.uuid4().hex
        body, deadline = (
            RunRequest(run_id, "print('taken')", QUICK).encode(),
            f"{time.time() + 60:.3f}",
        )
        headers = {layout.REPLY_HEADER: reply, layout.DEADLINE_HEADER: deadline, "Nats-Msg-Id": run_id,
                   SIGNATURE_HEADER: Signer(WORKERS_KEY).sign("run", subject, run_id, reply, deadline, body=body)}  # fmt: skip
        await nc.jetstream().publish(
            subject, body, headers=headers
        )  # signed with the very key this worker holds
        ours = await asyncio.wait_for(web.run("print('ours')", QUICK), 20)
        assert (ours.status, ours.stdout) == ("ok", "ours\n")
        await asyncio.sleep(1.5)  # a worker slot asks for a run every second
        assert (
            await nc.jetstream().stream_info(theirs.stream("cpu"))
        ).state.messages == 1  # still waiting there
        await until(lambda: status_of(web, worker.id)["done"] == 1)  # ours, and nothing else
    finally:
        await other.close()
        for device in ("cpu", "cuda"):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await nc.jetstream().delete_stream(Layout.of(other_url).stream(device))
        await nc.close()
