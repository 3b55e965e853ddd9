"""Only the web and the workers, which share AMPQUIZ_WORKERS_KEY, are believed on the workers'
NATS subjects: whoever else can publish there is an outsider forging messages, here a raw
nats-py client against real workers and a real web side (`RemoteRuns`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import nats
import pytest

from app.runs import jetstream as layout
from app.runs.messages import MAX_LIMITS, RunRequest, encode_result
from app.runs.remote import RemoteRuns
from app.runs.signing import SIGNATURE_HEADER, Signer
from sandbox import RunResult
from tests.support.cli import REPO
from tests.support.workers import (
    LAYOUT,
    NATS_SERVER,
    NATS_URL,
    QUICK,
    WORKERS_KEY,
    Start,
    remote_settings,
    reset_stream,
    status_of,
    until,
)

pytestmark = pytest.mark.anyio
OUTSIDERS_KEY = "an-outsider-guessing-the-key-" + "x" * 20


async def outsider() -> Any:
    return await nats.connect(NATS_SERVER, name="outsider")


async def overhear(nc: Any, subject: str) -> list[Any]:
    """Every message on `subject` from now on, as the outsider sees it."""
    heard: list[Any] = []

    async def took(msg: Any) -> None:
        heard.append(msg)

    await nc.subscribe(subject, cb=took)
    await nc.flush()
    return heard


async def test_a_forged_result_is_ignored_and_the_genuine_one_returned(
    web: RemoteRuns, start: Start
) -> None:
    await start(1)
    nc = await outsider()
    seen = await overhear(nc, LAYOUT.run_subject("*"))
    try:
        running = asyncio.ensure_future(
            web.run("import time\ntime.sleep(1.5)\nprint('genuine')", QUICK)
        )
        await until(
            lambda: bool(seen)
        )  # what travels in clear: the run's id and where its result goes
        request = seen[0]
        run_id, reply = request.headers["Nats-Msg-Id"], request.headers[layout.REPLY_HEADER]
        forged = encode_result(RunResult(status="ok", stdout="forged\n"))
        for signature in (
            None,
            "0" * 64,
            Signer(OUTSIDERS_KEY).sign("result", run_id, reply, body=forged),
        ):
            headers = {layout.RUN_HEADER: run_id} | (
                {SIGNATURE_HEADER: signature} if signature else {}
            )
            await nc.publish(reply, forged, headers=headers)
        await nc.flush()
        result = await asyncio.wait_for(running, 20)
    finally:
        await nc.close()
    assert (result.status, result.stdout) == ("ok", "genuine\n")
    assert web.signer.forgeries >= 3  # (other processes on a shared NATS server may add theirs)


async def test_a_forged_run_request_is_never_run_nor_answered(
    web: RemoteRuns, start: Start
) -> None:
    (worker,) = await start(1)
    nc = await outsider()
    js = nc.jetstream()
    listening = LAYOUT.results_subject(
        "0123456789ab"
    )  # a web's results subject, as a worker accepts
    answers, elsewhere = await overhear(nc, listening), await overhear(nc, "victim.>")
    subject = LAYOUT.run_subject("cpu")
    deadline = f"{time.time() + 60:.3f}"
    try:
        for n, (key, reply) in enumerate([
            (None, listening),  # no signature at all
            (OUTSIDERS_KEY, listening),  # signed with a key that is not the workers'
            (WORKERS_KEY, "victim.inbox"),  # even the key's holder cannot aim a worker's reply elsewhere
        ]):  # fmt: skip
            run_id = f"forged{n}"
            body = RunRequest(run_id, "print('pwned')", QUICK).encode()
            headers = {
                layout.REPLY_HEADER: reply,
                layout.DEADLINE_HEADER: deadline,
                "Nats-Msg-Id": run_id,
            }
            if key:
                headers[SIGNATURE_HEADER] = Signer(key).sign(
                    "run", subject, run_id, reply, deadline, body=body
                )
            await js.publish(subject, body, headers=headers)
        genuine = await web.run("print('genuine')", QUICK)  # queued behind the forgeries
        assert genuine.stdout == "genuine\n"
        await until(lambda: status_of(web, worker.id)["done"] == 1)
        await asyncio.sleep(1.5)  # another announcement: still only the genuine run
        consumer = await js.consumer_info(LAYOUT.stream("cpu"), layout.consumer_name("cpu"))
    finally:
        await nc.close()
    assert status_of(web, worker.id)["done"] == 1
    assert answers == elsewhere == []
    # Dropped for good, not left to be delivered again.
    assert (consumer.num_pending, consumer.num_ack_pending, consumer.num_redelivered) == (0, 0, 0)
    assert "pwned" not in worker.log.read_text()


async def test_a_captured_run_request_published_again_is_not_run_twice(
    web: RemoteRuns, start: Start
) -> None:
    """Whoever can read the queue can copy a signed request and publish it again, byte for byte.
    The server drops it by its id for longer than any request's deadline (past which the
    workers drop it, unrun): with its old 120 s window, a run with a long wall limit could be
    replayed, and run again, in between."""
    (worker,) = await start(1)
    nc = await outsider()
    seen = await overhear(nc, LAYOUT.run_subject("*"))
    try:
        assert (await web.run("print('once')", QUICK)).stdout == "once\n"
        await until(lambda: bool(seen) and status_of(web, worker.id)["done"] == 1)
        copy = seen[0]
        replayed = await nc.jetstream().publish(copy.subject, copy.data, headers=dict(copy.headers))
        await asyncio.sleep(1.5)  # a worker would have taken it by now, and announced it
        info = await nc.jetstream().stream_info(LAYOUT.stream("cpu"))
    finally:
        await nc.close()
    assert replayed.duplicate is True
    assert status_of(web, worker.id)["done"] == 1
    longest_deadline = layout.patience_s(MAX_LIMITS.wall_s)
    assert (
        info.config.duplicate_window is not None
        and info.config.duplicate_window >= longest_deadline
    )


async def test_a_forged_or_replayed_announcement_is_ignored(web: RemoteRuns, start: Start) -> None:
    (worker,) = await start(1)
    nc = await outsider()
    heard = await overhear(nc, LAYOUT.status_subject)
    await until(lambda: any(not json.loads(m.data).get("leaving") for m in heard))
    genuine = next(m for m in heard if not json.loads(m.data).get("leaving"))
    capacity = web.workers
    ghost = json.dumps({"id": "ghost", "device_kind": "cuda", "device_name": "a forged GPU",
                        "torch_version": "2.13.0", "slots": 64, "busy": 0, "sent": time.time()}).encode()  # fmt: skip
    try:
        for headers in (
            {},
            {SIGNATURE_HEADER: "f" * 64},
            {SIGNATURE_HEADER: Signer(OUTSIDERS_KEY).sign("status", body=ghost)},
        ):
            await nc.publish(LAYOUT.status_subject, ghost, headers=headers)
        await nc.flush()
        await asyncio.sleep(0.5)
        assert [w["id"] for w in web.online()] == [worker.id]
        assert web.devices() == ["cpu"]
        refused = await web.run("print(1)", QUICK, device="cuda")
        assert refused.status == "unavailable" and "no CUDA worker is online" in refused.message
        assert web.workers == capacity and [w["slots"] for w in web.status()["workers"]] == [1]

        worker.stop()  # it says goodbye; a replay of what it said while alive must not bring it back
        await until(lambda: web.online() == [])
        await nc.publish(LAYOUT.status_subject, genuine.data, headers=genuine.headers)
        await nc.flush()
        await asyncio.sleep(0.5)
        assert web.online() == []
    finally:
        await nc.close()
    assert web.signer.forgeries >= 3  # (other processes on a shared NATS server may add theirs)


@pytest.mark.parametrize("key", ["", "too-short"])
@pytest.mark.parametrize("command", [["worker"], ["serve"], ["workers"]])
def test_remote_mode_refuses_to_start_without_a_long_enough_key(
    command: list[str], key: str
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AMPQUIZ_WORKERS_URL": NATS_URL,
        "AMPQUIZ_WORKERS_KEY": key,
    }
    done = subprocess.run([sys.executable, "-m", "app.cli", *command], env=env, check=False,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "AMPQUIZ_WORKERS_KEY" in done.stderr and "32 characters" in done.stderr


async def raw_publish(subject: str, headers: list[tuple[str, str]], body: bytes) -> None:
    """A message published byte by byte, as no client library would: `headers` may repeat a name
    (a dict cannot), which the server and a client read differently."""
    url = urlsplit(NATS_SERVER)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    await reader.readline()  # the server's INFO
    block = ("NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode()
    writer.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
    writer.write(
        f"HPUB {subject} {len(block)} {len(block) + len(body)}\r\n".encode()
        + block
        + body
        + b"\r\nPING\r\n"
    )
    await writer.drain()
    assert (await reader.readline()).startswith(b"PONG"), "the server refused the message"
    writer.close()


async def test_a_flood_of_unsigned_runs_takes_no_capacity(web: RemoteRuns, start: Start) -> None:
    """The queue's room is the web's own count of its runs in flight: whoever can publish on the
    runs' subjects fills nothing the web's runs need (80 unsigned messages on the CUDA subject of
    a CPU-only deployment made every run a 429 for an hour)."""
    await start(1)
    nc = await outsider()
    try:
        for n in range(web.settings.run_queue + 64 + 20):
            for device in ("cuda", "cpu"):
                await nc.publish(
                    LAYOUT.run_subject(device),
                    b"{}",
                    headers={"Nats-Msg-Id": f"flood-{device}-{n}"},
                )
        await nc.flush()
        result = await asyncio.wait_for(web.run("print('through')", QUICK), 20)
    finally:
        await nc.close()
    assert (result.status, result.stdout) == ("ok", "through\n")


async def test_a_forged_advisory_does_not_kill_a_run_in_flight(
    web: RemoteRuns, start: Start
) -> None:
    """JetStream's advisories are no one's word: anyone can publish "its deliveries ran out" for
    every sequence number. A run is lost only on its worker's signed word, or its lease lapsing."""
    (worker,) = await start(1)
    nc = await outsider()
    try:
        running = asyncio.ensure_future(
            web.run("import time\ntime.sleep(2)\nprint('finished')", QUICK)
        )
        await until(lambda: status_of(web, worker.id)["busy"] == 1)
        for stream in (f"AMPQUIZ_RUNS_{LAYOUT.name}", f"AMPQUIZ_RUNS_{LAYOUT.name}_cpu"):
            subject = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.runs-cpu"
            for seq in range(1, 100):
                advisory = {"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": stream,
                            "consumer": "runs-cpu", "stream_seq": seq, "deliveries": 2}  # fmt: skip
                await nc.publish(subject, json.dumps(advisory).encode())
        await nc.flush()
        result = await asyncio.wait_for(running, 20)
    finally:
        await nc.close()
    assert (result.status, result.stdout) == ("ok", "finished\n")
    assert web.lost == 0


async def test_a_signed_request_with_a_second_msg_id_header_runs_once(
    web: RemoteRuns, start: Start
) -> None:
    """The server dedupes on the first `Nats-Msg-Id`, a client library keeps the last: a captured
    request republished with a fresh id first and its own last ran again and again. A worker
    believes only canonical headers: the names it expects, each once."""
    (worker,) = await start(1)
    nc = await outsider()
    seen = await overhear(nc, LAYOUT.run_subject("*"))
    try:
        assert (await web.run("print('once')", QUICK)).stdout == "once\n"
        await until(lambda: bool(seen) and status_of(web, worker.id)["done"] == 1)
        copy = seen[0]
        for n in range(3):
            headers = [("Nats-Msg-Id", f"fresh-{n}-{uuid.uuid4().hex}"), *copy.headers.items()]
            await raw_publish(copy.subject, headers, copy.data)
        for key in ("Ampquiz-Deadline", "Ampquiz-Reply"):  # any other name repeated: refused too
            await raw_publish(
                copy.subject, [*copy.headers.items(), (key, copy.headers[key])], copy.data
            )
        after = await asyncio.wait_for(web.run("print('next')", QUICK), 20)
        await asyncio.sleep(1.5)  # announced since
    finally:
        await nc.close()
    assert after.stdout == "next\n"
    assert status_of(web, worker.id)["done"] == 2  # 'once' and 'next', nothing replayed


async def test_a_signed_request_replayed_after_the_queue_forgot_it_runs_once(
    web: RemoteRuns, start: Start
) -> None:
    """The server's duplicate window is its memory: a restart (the runs wait in memory) or a
    stream made anew forgets it. The worker keeps the ids it ran until their signed deadline."""
    (worker,) = await start(1)
    nc = await outsider()
    seen = await overhear(nc, LAYOUT.run_subject("*"))
    try:
        assert (await web.run("print('once')", QUICK)).stdout == "once\n"
        await until(lambda: bool(seen) and status_of(web, worker.id)["done"] == 1)
        copy = seen[0]
        await reset_stream()  # as a restarted NATS server: the queue, and what it remembered, gone
        again = await RemoteRuns.connect(
            NATS_URL, remote_settings(), discover_s=0.3
        )  # makes it anew
        try:
            ack = await nc.jetstream().publish(copy.subject, copy.data, headers=dict(copy.headers))
            assert ack.duplicate is not True  # the server took it as new
            after = await asyncio.wait_for(again.run("print('next')", QUICK), 30)
            await asyncio.sleep(1.5)
        finally:
            await again.close()
    finally:
        await nc.close()
    assert after.stdout == "next\n"
    assert status_of(web, worker.id)["done"] == 2, worker.log.read_text()[-2000:]
