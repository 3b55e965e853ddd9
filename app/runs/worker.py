"""`ampquiz worker`: a sandbox host's side of remote runs (see app.runs.jetstream for the layout).

It starts the local warm pool (CPU or CUDA, whatever the host has), announces what it can run,
and has one pull loop per slot: a loop asks NATS for a run only while its slot is free. A run is
acknowledged after its result reached the web process waiting for it; while it runs, its lease is
renewed, up to its wall limit plus a margin. It logs one line per run.

Each slot is a thread with an event loop and a NATS connection of its own, and runs its snippet
on that thread, blocking only its own loop: a run is never handed to a thread and back (each
hand-off waits for a core, and those waits were most of what a remote run cost over a local one
on a busy host). The main loop announces, answers pings and keeps the running runs' leases.

Runs in: the worker process on a sandbox host (it never runs a snippet itself: the pool does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import nats
import nats.errors
from nats.aio.msg import Msg

from app.runs import jetstream as layout
from app.runs.local import local_worker_status
from app.runs.messages import BadMessage, RunRequest, encode_result
from app.runs.signing import SIGNATURE_HEADER, Signer, announcement
from sandbox import Environment, RunResult, Sandbox

log = logging.getLogger("ampquiz.worker")


FETCH_S = 1.0
"""How long a free slot's request for a run stays open: also how soon an idle slot notices a stop."""


class Worker:
    def __init__(
        self, pool: Sandbox, url: str, key: str, *, slots: int | None = None, queue_limit: int = 16
    ) -> None:
        self.pool = pool
        self.url = url
        self.layout = layout.Layout.of(url)
        self.signer = Signer(key)
        self.slots = slots or pool.workers
        self.queue_limit = queue_limit
        self.device = "cuda" if pool.environment.get("device_kind") == "cuda" else "cpu"
        self.id = f"{socket.gethostname()}-{os.getpid()}"
        self.busy = 0
        self.done = 0
        self.failed = 0
        self.started = time.time()
        self._counting = threading.Lock()  # the slots' threads count runs together
        self._leases: dict[str, tuple[str, float]] = {}
        """Runs being run, by id: where their "still working" signs go, and until when."""
        self._stop = asyncio.Event()
        self._stopping = threading.Event()
        self.nc: Any = None

    def status(self) -> dict[str, Any]:
        line = local_worker_status(self.pool, self.id)
        line.update(slots=self.slots, busy=self.busy, done=self.done, failed=self.failed,
                    started=self.started, leaving=self._stopping.is_set())  # fmt: skip
        return line

    async def serve(self) -> None:
        """Until `stop()` (or SIGTERM/SIGINT from the CLI): pull, run, reply, acknowledge."""
        self.nc = await layout.connect(self.url, f"ampquiz-worker {self.id}")
        await layout.ensure_layout(self.nc.jetstream(), self.layout, self.queue_limit)
        await self.nc.subscribe(self.layout.ping_subject, cb=self._pong)
        chores = [
            asyncio.ensure_future(self._announce()),
            asyncio.ensure_future(self._keep_leases()),
        ]
        new_loop = _loop_factory(asyncio.get_running_loop())
        slots = [threading.Thread(target=self._slot_thread, args=(n, new_loop), name=f"worker-slot-{n}", daemon=True)
                 for n in range(self.slots)]  # fmt: skip
        for slot in slots:
            slot.start()
        log.info("worker %s: %d slots on %s (%s), torch %s", self.id, self.slots, self.device,
                 self.pool.environment.get("device_name"), self.pool.environment.get("torch_version"))  # fmt: skip
        await self._stop.wait()
        self._stopping.set()  # each slot finishes its run, if any, and takes no other
        for slot in slots:
            await asyncio.to_thread(slot.join)
        for chore in chores:
            chore.cancel()
        await asyncio.gather(*chores, return_exceptions=True)
        with contextlib.suppress(Exception):  # say goodbye, so the web stops routing here at once
            body, headers = announcement(self.signer, self.status())
            await self.nc.publish(self.layout.status_subject, body, headers=headers)
            await self.nc.drain()
        log.info("worker %s stopped after %d runs (%d failed)", self.id, self.done, self.failed)

    def stop(self) -> None:
        self._stopping.set()
        self._stop.set()

    async def _pong(self, msg: Msg) -> None:
        # Anyone may ask (what it says is signed); the answer goes to the asker's inbox only.
        if msg.reply.startswith("_INBOX."):
            body, headers = announcement(self.signer, self.status())
            await self.nc.publish(msg.reply, body, headers=headers)

    async def _announce(self) -> None:
        while True:
            body, headers = announcement(self.signer, self.status())
            await self.nc.publish(self.layout.status_subject, body, headers=headers)
            await asyncio.sleep(layout.ANNOUNCE_S)

    async def _keep_leases(self) -> None:
        """Tells the server each running run is still being worked on, but no longer than its wall
        limit plus a margin: a worker stuck past that loses the run to another. (From this loop:
        a slot's own loop is blocked while its snippet runs.)"""
        while True:
            await asyncio.sleep(layout.LEASE_EVERY_S)
            now = time.monotonic()
            for ack_subject, until in list(self._leases.values()):
                if now < until:
                    with contextlib.suppress(Exception):
                        await self.nc.publish(ack_subject, b"+WPI")  # what Msg.in_progress() sends

    # ---- a slot: its own thread, loop and connection ----------------------------------------

    def _slot_thread(
        self, n: int, new_loop: Callable[[], asyncio.AbstractEventLoop] | None
    ) -> None:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            runner.run(self._slot(n))

    async def _slot(self, n: int) -> None:
        nc = await layout.connect(self.url, f"ampquiz-worker {self.id} slot {n}")
        try:
            psub = await nc.jetstream().pull_subscribe_bind(
                durable=layout.consumer_name(self.device), stream=self.layout.stream
            )
            while not self._stopping.is_set():
                try:
                    msgs = await psub.fetch(1, timeout=FETCH_S)
                except nats.errors.TimeoutError:
                    continue
                except Exception as exc:  # noqa: BLE001 - a reconnect in progress: try again shortly
                    log.warning("worker %s slot %d: fetch failed: %s", self.id, n, exc)
                    await asyncio.sleep(1)
                    continue
                for msg in msgs:
                    try:
                        await self._handle(nc, msg)
                    except (
                        Exception
                    ):  # one bad message (a forged header, say) never ends this slot's loop
                        log.exception(
                            "worker %s: a run message could not be handled; dropped", self.id
                        )
                        with contextlib.suppress(Exception):
                            await msg.term()
        finally:
            # Not drain(): the pull subscription's last request for a run can still be answered
            # (a timeout status nobody reads), and drain waited 30 s for it. Everything this slot
            # sent (its last result, its last ack) is flushed first.
            with contextlib.suppress(Exception):
                await nc.flush(timeout=2)
            with contextlib.suppress(Exception):
                await nc.close()

    async def _handle(self, nc: Any, msg: Msg) -> None:
        headers = msg.headers or {}
        reply = headers.get(layout.REPLY_HEADER, "")
        run_id = headers.get("Nats-Msg-Id", "")
        deadline_said = headers.get(layout.DEADLINE_HEADER, "")
        # Only a web process holding the key may make this worker run code, and reply only where
        # a web process listens: anything else is dropped for good, never run, never answered.
        signed = self.signer.verify(
            headers, "run", msg.subject, run_id, reply, deadline_said, body=msg.data
        )
        if not signed or not self.layout.is_results_subject(reply):
            if signed:
                log.error(
                    "worker %s: refused run %s: it asks for its result on %r",
                    self.id,
                    run_id,
                    reply,
                )
            await msg.term()
            return
        try:
            request = RunRequest.decode(msg.data)
            if request.id != run_id:
                raise BadMessage("the run's id differs from its message id")
        except BadMessage as exc:
            log.error("worker %s: refused a malformed run: %s", self.id, exc)
            # Whoever waits hears why at once, rather than a lost run much later.
            refused = RunResult(status="unavailable", message=f"The worker refused this run: {exc}",
                                environment=Environment.from_dict(self.pool.environment))  # fmt: skip
            payload = encode_result(refused)
            await self._deliver(nc, reply, run_id, payload, self._signature(run_id, reply, payload))
            await msg.term()
            return
        try:
            deadline = float(deadline_said or "inf")
        except ValueError:
            deadline = 0.0  # not a time: nobody can be said to wait for it
        if time.time() > deadline:
            log.info("run %s dropped: nobody waits for it any more", request.id)
            await msg.term()
            return
        with self._counting:
            self.busy += 1
        started = time.perf_counter()
        self._leases[request.id] = (
            msg.reply,
            time.monotonic() + request.limits.wall_s + layout.LEASE_MARGIN_S,
        )
        # The runner this run uses up is replaced once its result is with the web: preparing it
        # meanwhile slowed both the run and the delivery (this is the pool's thread: the slot's).
        with self.pool.results_first():
            try:
                result, payload, signature = self._run(
                    request, reply
                )  # blocks this slot's loop only
            finally:
                self._leases.pop(request.id, None)
                with self._counting:
                    self.busy -= 1
            with self._counting:
                self.done += 1
                self.failed += result.status not in ("ok", "error")
            delivered = await self._deliver(nc, reply, request.id, payload, signature)
        await msg.ack()
        log.info("run %s: %s in %.1f ms (delivery %d)%s", request.id, result.status,
                 (time.perf_counter() - started) * 1000, msg.metadata.num_delivered,
                 "" if delivered else "; nobody was waiting for the result")  # fmt: skip

    def _run(self, request: RunRequest, reply: str) -> tuple[RunResult, bytes, str]:
        """The run, and its result already encoded and signed."""
        try:
            result = self.pool.run(
                request.code, request.limits, explain=request.explain, device=request.device
            )
        except Exception as exc:  # noqa: BLE001 - the pool itself failed: the web hears it, the run is not retried
            env = Environment.from_dict(self.pool.environment)
            result = RunResult(
                status="killed",
                message=f"The sandbox on worker {self.id} failed: {exc}",
                environment=env,
            )
        payload = encode_result(result)
        return result, payload, self._signature(request.id, reply, payload)

    def _signature(self, run_id: str, reply: str, payload: bytes) -> str:
        """What tells the web this result comes from a worker, for this run, sent to it."""
        return self.signer.sign("result", run_id, reply, body=payload)

    async def _deliver(
        self, nc: Any, reply: str, run_id: str, payload: bytes, signature: str
    ) -> bool:
        try:
            headers = {layout.RUN_HEADER: run_id, SIGNATURE_HEADER: signature}
            await nc.request(reply, payload, timeout=5, headers=headers)
            return True
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            return False  # the web process is gone: nobody to tell


def _loop_factory(
    running: asyncio.AbstractEventLoop,
) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The slots' loops are of the main loop's kind (uvloop where the CLI uses it)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop if isinstance(running, uvloop.Loop) else None
