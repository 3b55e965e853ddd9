"""`ampquiz worker`: a sandbox host's side of remote runs (see app.runs.jetstream for the layout).

It starts the local warm pool (CPU or CUDA, whatever the host has), announces what it can run,
and has one pull loop per slot: a loop asks NATS for a run only while its slot is free. A run is
acknowledged after its result reached the web process waiting for it; while it runs, its lease is
renewed, up to its wall limit plus a margin, and its announcements say it holds the run. It runs
only what the web signed, with canonical headers, and each run id once until its deadline
(`Seen`). It logs one line per run.

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
from app.runs.jetstream import Broker
from app.runs.local import local_worker_status
from app.runs.messages import BadMessage, RunRequest, encode_result
from app.runs.signing import SIGNATURE_HEADER, Signer, announcement
from sandbox import Environment, RunResult, Sandbox

log = logging.getLogger("ampquiz.worker")


FETCH_S = 1.0
"""How long a free slot's request for a run stays open: also how soon an idle slot notices a stop."""
SEEN_AT_MOST = 200_000
"""Run ids a worker keeps (`Seen`): some 30 MB, a run every 4 ms for the longest deadline."""


class Seen:
    """The runs this worker took, each kept until its signed deadline: a run id is taken once (and
    again only on a later delivery of the server's, after a worker died), so a signed request
    captured and published again is not run again, even where the server has forgotten it (a
    restart: the queue is in memory). Bounded: past `SEEN_AT_MOST` ids the oldest goes, for which
    the server's duplicate window still stands."""

    def __init__(self, at_most: int = SEEN_AT_MOST) -> None:
        self.at_most = at_most
        self._deadlines: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()  # every slot's thread takes runs

    def take(self, run_id: str, deadline: float, delivery: int) -> bool:
        """Whether the run may be run: never taken, or taken at an earlier delivery."""
        now = time.time()
        with self._lock:
            taken = self._deadlines.get(run_id)
            if taken is not None and taken[0] >= now and delivery <= taken[1]:
                return False
            self._deadlines.pop(run_id, None)
            # The oldest first (kept in that order): past its deadline, or one too many.
            while self._deadlines:
                oldest = next(iter(self._deadlines))
                if self._deadlines[oldest][0] >= now and len(self._deadlines) < self.at_most:
                    break
                del self._deadlines[oldest]
            self._deadlines[run_id] = (deadline, delivery)
            return True


class Worker:
    def __init__(
        self, pool: Sandbox, broker: Broker, key: str, *, slots: int | None = None
    ) -> None:
        self.pool = pool
        self.broker = broker
        self.layout = layout.Layout.of(broker.url)
        self.signer = Signer(key)
        self.slots = slots or pool.workers
        self.seen = Seen()
        self.device = "cuda" if pool.environment.get("device_kind") == "cuda" else "cpu"
        self.id = f"{socket.gethostname()}-{os.getpid()}"
        self.busy = 0
        self.done = 0
        self.failed = 0
        self.started = time.time()
        self._counting = threading.Lock()  # the slots' threads count runs together
        self._leases: dict[str, tuple[str, float, int]] = {}
        """Runs held, by id, from their start to their acknowledgement: where their "still
        working" signs go, until when, and at which of the server's deliveries."""
        self._stop = asyncio.Event()
        self._stopping = threading.Event()
        self.nc: Any = None

    def status(self) -> dict[str, Any]:
        line = local_worker_status(self.pool, self.id)
        now = time.monotonic()
        holding = {
            run: delivery for run, (_, until, delivery) in list(self._leases.items()) if now < until
        }
        line.update(slots=self.slots, busy=self.busy, done=self.done, failed=self.failed,
                    started=self.started, leaving=self._stopping.is_set(), holding=holding)  # fmt: skip
        return line

    async def serve(self) -> None:
        """Until `stop()` (or SIGTERM/SIGINT from the CLI): pull, run, reply, acknowledge."""
        self.nc = await layout.connect(self.broker, f"ampquiz-worker {self.id}", "worker")
        if self.broker.insecure and not self.broker.authenticated:
            log.warning("worker %s: the NATS server at %s is used with no credentials (%s): "
                        "anyone who can reach it reads every run and result", self.id,
                        self.broker.where(), layout.INSECURE)  # fmt: skip
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
            for ack_subject, until, _ in list(self._leases.values()):
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
        nc = await layout.connect(self.broker, f"ampquiz-worker {self.id} slot {n}", "worker")
        try:
            # The web makes the queue (a worker's role may not): until it has, a fetch fails.
            psub = await nc.jetstream().pull_subscribe_bind(
                durable=layout.consumer_name(self.device), stream=self.layout.stream(self.device)
            )
            failing = ""
            while not self._stopping.is_set():
                try:
                    msgs = await psub.fetch(1, timeout=FETCH_S)
                    failing = ""
                except nats.errors.TimeoutError:
                    continue
                except Exception as exc:  # noqa: BLE001 - a reconnect, or no queue yet: try again shortly
                    if str(exc) != failing:  # once, not every second
                        log.warning(
                            "worker %s slot %d: fetch failed (tried again every second): %s",
                            self.id,
                            n,
                            exc,
                        )
                    failing = str(exc)
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
        run_id = headers.get(layout.MSG_ID_HEADER, "")
        deadline_said = headers.get(layout.DEADLINE_HEADER, "")
        # Only a web process holding the key may make this worker run code, with the headers it
        # signed and no other, and reply only where a web process listens: anything else is
        # dropped for good, never run, never answered.
        signed = self.signer.verify(
            headers, "run", msg.subject, run_id, reply, deadline_said, body=msg.data,
            names=layout.RUN_HEADERS,
        )  # fmt: skip
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
        now = time.time()
        if now > deadline:
            log.info("run %s dropped: nobody waits for it any more", request.id)
            await msg.term()
            return
        if deadline > now + layout.LONGEST_DEADLINE_S:  # also what bounds how long its id is kept
            log.error(
                "worker %s: refused run %s: its deadline is further than any run's",
                self.id,
                request.id,
            )
            await msg.term()
            return
        delivery = msg.metadata.num_delivered
        if not self.seen.take(request.id, deadline, delivery):
            log.warning(
                "worker %s: refused run %s: taken before (a copy published again)",
                self.id,
                request.id,
            )
            await msg.term()
            return
        with self._counting:
            self.busy += 1
        started = time.perf_counter()
        self._leases[request.id] = (
            msg.reply,
            time.monotonic() + request.limits.wall_s + layout.LEASE_MARGIN_S,
            delivery,
        )
        try:
            # The runner this run uses up is replaced once its result is with the web: preparing
            # it meanwhile slowed both the run and the delivery (this is the pool's thread: the slot's).
            with self.pool.results_first():
                try:  # blocks this slot's loop only
                    result, payload, signature = self._run(request, reply)
                finally:
                    with self._counting:
                        self.busy -= 1
                with self._counting:
                    self.done += 1
                    self.failed += result.status not in ("ok", "error")
                delivered = await self._deliver(nc, reply, request.id, payload, signature)
            await msg.ack()
        finally:
            self._leases.pop(request.id, None)  # held until acknowledged: see `status`
        log.info("run %s: %s in %.1f ms (delivery %d)%s", request.id, result.status,
                 (time.perf_counter() - started) * 1000, delivery,
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
