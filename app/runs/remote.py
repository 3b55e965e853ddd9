"""`RemoteRuns`: the web's side of sandbox workers on other machines (`AMPQUIZ_WORKERS_URL=nats://…`).

A run is published to the work queue of the device it needs (see app.runs.jetstream) and its
result awaited on this process's own results subject. What the workers online can run is known
from their announcements, so a run nobody online can take is refused at once ("no CUDA worker is
online"), never queued silently. A result is a claim from another machine: checked before use,
and taken once (a run delivered twice, after its first worker died, may answer twice).

Only signed words are believed. The room for runs is this process's own count of its runs in
flight, never what the stream holds (anyone allowed to publish there fills that). A run is lost
when its holder, as the workers' signed announcements say, stops holding it on its last delivery
without a result (its lease lapsed: the worker died or ran out its time), when no worker of its
kind has been online for a while, or when its deadline passed; never on JetStream's advisories,
which anyone can publish.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg

from app.runs import RunsFull
from app.runs import jetstream as layout
from app.runs.jetstream import Broker
from app.runs.messages import BadMessage, RunRequest, result_from_claim
from app.runs.signing import (
    SIGNATURE_HEADER,
    Signer,
    nobody_online,
    read_announcement,
    signed_with_another_key,
)
from sandbox import Environment, Limits, RunResult, SandboxError

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger("ampquiz.runs")

NO_WORKER = "{subject} needs a {kind} worker, and no {kind} worker is online right now."
LOST = ("The run was lost: the worker running it stopped before it finished, and so did the one "
        "that tried it again. Nothing else was affected; run it again.")  # fmt: skip
NO_WORKER_LEFT = ("The run was lost: no {kind} worker is online any more to finish it (its worker "
                  "stopped). Run it again when one is.")  # fmt: skip


@dataclass
class Waiting:
    """A run this process published and waits for."""

    result: asyncio.Future[RunResult]
    device: str
    deadline: float
    """Monotonic time past which nobody waits for it any more."""
    nobody_since: float | None = None
    """Since when no worker of its device kind has been online."""
    delivery: int = 0
    """The server's delivery its holder said it holds (0: no worker said so yet)."""
    lease_until: float = 0.0
    """Monotonic time its holder's lease lapses unless the holder says it holds it again."""

    def lease_lapsed(self, now: float) -> bool:
        """Its holder stopped holding it on the last delivery there is, and said no result."""
        return self.delivery >= layout.MAX_DELIVERIES and now > self.lease_until


class RemoteRuns:
    keeps_turns = False  # each web process keeps its own, and counts its own runs in flight

    def __init__(
        self, nc: Any, settings: Settings, names: layout.Layout, broker: Broker | None = None
    ) -> None:
        self.nc = nc
        self.broker = broker or Broker.of(settings)
        self.js = nc.jetstream()
        self.settings = settings
        self.signer = Signer(settings.workers_key)
        self.web_id = uuid.uuid4().hex[:12]
        self.layout = names
        self.results_subject = names.results_subject(self.web_id)
        self.workers = settings.sandbox_workers
        self.max_in_flight = settings.run_queue + 64
        """Runs this process may have published and not heard back from: its room, counted by itself."""
        self._announced: dict[str, dict[str, Any]] = {}
        self._waiting: dict[str, Waiting] = {}
        self._last_env: dict[str, Any] = {}
        self.lost = 0
        self.other_key = 0
        """Worker statuses heard signed with another key (see `signing.nobody_online`)."""
        self._watchdog: asyncio.Future[None] | None = None

    @classmethod
    async def connect(cls, url: str, settings: Settings, *, discover_s: float = 1.5) -> RemoteRuns:
        """BrokerRefused when `url` has no credentials and AMPQUIZ_BROKER_INSECURE does not allow it."""
        broker = Broker.of(settings, url)
        nc = await layout.connect(broker, "ampquiz-web", "web")
        runs = cls(nc, settings, layout.Layout.of(url), broker)
        if broker.insecure and not broker.authenticated:
            log.warning("remote workers: the NATS server at %s is used with no credentials (%s): "
                        "anyone who can reach it reads every run and result", broker.where(), layout.INSECURE)  # fmt: skip
        await layout.ensure_layout(runs.js, runs.layout)
        await nc.subscribe(runs.results_subject, cb=runs._on_result)
        await nc.subscribe(runs.layout.status_subject, cb=runs._on_status)
        runs._watchdog = asyncio.ensure_future(runs._watch())
        await runs.discover(discover_s)
        online = runs.online()
        runs.workers = max(settings.sandbox_workers, sum(int(w.get("slots") or 0) for w in online))
        log.info(
            "remote workers: %d online (%s)",
            len(online),
            ", ".join(f"{w['id']} {w['device_kind']}" for w in online) or "none yet",
        )
        if not online and runs.other_key:
            log.warning("remote workers: %s", nobody_online(broker.where(), runs.other_key))
        return runs

    # ---- what is online --------------------------------------------------------------------

    async def discover(self, wait_s: float) -> None:
        """Asks every worker to say what it is now (rather than waiting for its next announcement)."""
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=self._on_status)
        await self.nc.publish(self.layout.ping_subject, b"", reply=inbox)
        await asyncio.sleep(wait_s)
        await sub.unsubscribe()

    async def _on_status(self, msg: Msg) -> None:
        if not msg.data:  # the server's "no responders" to a ping: nobody said anything
            return
        status = read_announcement(self.signer, msg.data, msg.headers)
        if status is None:
            self.other_key += signed_with_another_key(self.signer, msg.data, msg.headers)
            return
        known = self._announced.get(status["id"])
        if known is not None and known["sent"] >= status["sent"]:
            return  # not newer than what this worker last said: a replay, or late
        now = time.monotonic()
        status["_seen"] = now
        holding = status.pop("holding", None)
        self._announced[status["id"]] = status
        if isinstance(holding, dict):  # its runs' leases, renewed as the server's are
            for run_id, delivery in holding.items():
                waiting = self._waiting.get(run_id)
                if waiting is not None and isinstance(delivery, int):
                    waiting.delivery, waiting.lease_until = delivery, now + layout.ACK_WAIT_S

    def online(self, device: str | None = None) -> list[dict[str, Any]]:
        workers = layout.online(self._announced, time.monotonic())
        return [w for w in workers if device is None or w.get("device_kind") == device]

    @property
    def environment(self) -> dict[str, Any]:
        """The environment of the workers a run with no device goes to (CPU ones first)."""
        for kind in ("cpu", "cuda"):
            found = self.online(kind)
            if found:
                self._last_env = {
                    k: found[0].get(k)
                    for k in ("torch_version", "device_kind", "device_name", "cuda_version")
                }
                break
        return self._last_env or {"device_kind": "cpu", "torch_version": ""}

    @property
    def alive(self) -> bool:
        return bool(self.nc.is_connected and self.online())

    def devices(self) -> list[str]:
        return sorted({str(w.get("device_kind")) for w in self.online()})

    def _route(self, device: str | None) -> str | None:
        if device is not None:
            return device if self.online(device) else None
        return "cpu" if self.online("cpu") else ("cuda" if self.online("cuda") else None)

    def refusal(self, device: str | None, subject: str) -> RunResult | None:
        if self._route(device) is not None:
            return None
        kind = {"cuda": "CUDA", "cpu": "CPU"}.get(device or "", "sandbox")
        return RunResult(status="unavailable", message=NO_WORKER.format(subject=subject, kind=kind),
                         environment=Environment.from_dict(self.environment))  # fmt: skip

    # ---- running -----------------------------------------------------------------------------

    async def run(
        self, code: str, limits: Limits, *, explain: bool = False, device: str | None = None
    ) -> RunResult:
        routed = self._route(device)
        if routed is None:
            refused = self.refusal(device, "This snippet")
            assert refused is not None
            return refused
        if len(self._waiting) >= self.max_in_flight:
            raise RunsFull()  # this process's own count: nobody else's messages take its room
        run_id = uuid.uuid4().hex
        patience = layout.patience_s(limits.wall_s)
        waiting = Waiting(
            asyncio.get_running_loop().create_future(), routed, time.monotonic() + patience
        )
        self._waiting[run_id] = waiting
        subject, body = (
            self.layout.run_subject(routed),
            RunRequest(run_id, code, limits, explain, device).encode(),
        )
        deadline_said = f"{time.time() + patience:.3f}"
        headers = {
            layout.REPLY_HEADER: self.results_subject,
            layout.DEADLINE_HEADER: deadline_said,
            layout.MSG_ID_HEADER: run_id,
            SIGNATURE_HEADER: self.signer.sign(
                "run", subject, run_id, self.results_subject, deadline_said, body=body
            ),
        }
        try:
            try:
                await self.js.publish(subject, body, headers=headers)
            except nats.js.errors.APIError as exc:  # a stream full of anyone's messages: 503
                raise SandboxError(f"the workers' queue refused the run: {exc}") from None
            except (
                nats.errors.Error,
                OSError,
            ) as exc:  # NATS unreachable, reconnecting: 503 for now
                raise SandboxError(f"the workers' queue cannot be reached: {exc!r}") from None
            # Awaited directly: the result's callback wakes this task, with no timer in between;
            # `_watch` is what ends a run nothing will ever answer.
            return await waiting.result
        finally:
            self._waiting.pop(run_id, None)

    async def _watch(self) -> None:
        """Every half second: workers silent for long are forgotten, and a run is reported lost
        when its holder's lease lapsed on its last delivery (`Waiting.lease_lapsed`), when no
        worker of its kind has been online for a while, or when its whole patience ran out."""
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            for worker_id, said in list(self._announced.items()):
                if now - said.get("_seen", now) > layout.FORGET_AFTER_S:
                    del self._announced[worker_id]  # each restart is a new id: do not keep them all
            for run_id, waiting in list(self._waiting.items()):
                if waiting.result.done():
                    continue
                if self.online(waiting.device):
                    waiting.nobody_since = None
                elif waiting.nobody_since is None:
                    waiting.nobody_since = now
                nobody = (
                    waiting.nobody_since is not None
                    and now - waiting.nobody_since > layout.NO_WORKER_GRACE_S
                )
                lapsed = waiting.lease_lapsed(now)
                if lapsed:
                    log.warning(
                        "run %s lost: its worker stopped holding it on its last delivery", run_id
                    )
                if now > waiting.deadline or nobody or lapsed:
                    self.lost += 1
                    waiting.result.set_result(
                        self._lost(
                            NO_WORKER_LEFT.format(kind=waiting.device.upper()) if nobody else LOST
                        )
                    )

    def _lost(self, message: str = LOST) -> RunResult:
        return RunResult(
            status="killed", message=message, environment=Environment.from_dict(self.environment)
        )

    async def _on_result(self, msg: Msg) -> None:
        run_id = (msg.headers or {}).get(layout.RUN_HEADER, "")
        entry = self._waiting.get(run_id)
        if not self.signer.verify(
            msg.headers, "result", run_id, self.results_subject, body=msg.data,
            names=layout.RESULT_HEADERS,
        ):  # fmt: skip
            return  # not from a worker holding the key: the run keeps waiting for the genuine one
        waiting = entry.result if entry is not None else None
        taken = waiting is not None and not waiting.done()
        # First the learner's result, then the worker's receipt: it is off their clock.
        if waiting is not None and taken:
            try:
                waiting.set_result(result_from_claim(msg.data))
            except BadMessage as exc:
                log.error("a worker sent a malformed result for run %s: %s", run_id, exc)
                waiting.set_result(RunResult(status="killed", message=f"The worker's answer could not be read: {exc}",
                                             environment=Environment.from_dict(self.environment)))  # fmt: skip
        # A second answer to a run delivered twice, or one nobody waits for any more, is dropped.
        await msg.respond(b"taken" if taken else b"not waited for")

    def status(self) -> dict[str, Any]:
        workers = [{k: v for k, v in w.items() if not k.startswith("_")} for w in self.online()]
        authenticated = self.broker.authenticated
        return {"kind": "remote", "url": self.broker.where(),  # never a password in /healthz
                "broker": {"authenticated": authenticated, "insecure": not authenticated},
                "connected": bool(self.nc.is_connected),
                "workers": workers, "lost": self.lost, "signed_with_another_key": self.other_key}  # fmt: skip

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        for waiting in self._waiting.values():
            if not waiting.result.done():
                waiting.result.cancel()
        await self.nc.drain()
