"""`RemoteRuns`: the web's side of sandbox workers on other machines (`AMPQUIZ_WORKERS_URL=nats://…`).

A run is published to the work queue of the device it needs (see app.runs.jetstream) and its
result awaited on this process's own results subject. What the workers online can run is known
from their announcements, so a run nobody online can take is refused at once ("no CUDA worker is
online"), never queued silently. A result is a claim from another machine: checked before use,
and taken once (a run delivered twice, after its first worker died, may answer twice).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg

from app.runs import RunsFull
from app.runs import jetstream as layout
from app.runs.messages import BadMessage, RunRequest, result_from_claim
from sandbox import Environment, Limits, RunResult, SandboxError

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger("ampquiz.runs")

NO_WORKER = "{subject} needs a {kind} worker, and no {kind} worker is online right now."
LOST = ("The run was lost: the worker running it stopped before it finished, and so did the one "
        "that tried it again. Nothing else was affected; run it again.")  # fmt: skip
NO_WORKER_LEFT = ("The run was lost: no {kind} worker is online any more to finish it (its worker "
                  "stopped). Run it again when one is.")  # fmt: skip


class RemoteRuns:
    def __init__(self, nc: Any, settings: Settings) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.settings = settings
        self.web_id = uuid.uuid4().hex[:12]
        self.workers = settings.sandbox_workers
        self._announced: dict[str, dict[str, Any]] = {}
        self._waiting: dict[str, asyncio.Future[RunResult]] = {}
        self._by_sequence: dict[int, str] = {}
        self._last_env: dict[str, Any] = {}
        self.lost = 0

    @classmethod
    async def connect(cls, url: str, settings: Settings, *, discover_s: float = 1.5) -> RemoteRuns:
        nc = await layout.connect(url, "ampquiz-web")
        runs = cls(nc, settings)
        await layout.ensure_layout(runs.js, settings.run_queue + 64)
        await nc.subscribe(layout.RESULTS_SUBJECT.format(web=runs.web_id), cb=runs._on_result)
        await nc.subscribe(layout.STATUS_SUBJECT, cb=runs._on_status)
        await nc.subscribe(layout.MAX_DELIVERIES_ADVISORY, cb=runs._on_gave_up)
        await runs.discover(discover_s)
        online = runs.online()
        runs.workers = max(settings.sandbox_workers, sum(int(w.get("slots") or 0) for w in online))
        log.info("remote workers: %d online (%s)", len(online), ", ".join(f"{w['id']} {w['device_kind']}" for w in online) or "none yet")
        return runs

    # ---- what is online --------------------------------------------------------------------

    async def discover(self, wait_s: float) -> None:
        """Asks every worker to say what it is now (rather than waiting for its next announcement)."""
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=self._on_status)
        await self.nc.publish(layout.PING_SUBJECT, b"", reply=inbox)
        await asyncio.sleep(wait_s)
        await sub.unsubscribe()

    async def _on_status(self, msg: Msg) -> None:
        try:
            status = json.loads(msg.data)
            if not isinstance(status, dict) or not isinstance(status.get("id"), str):
                return
        except ValueError:
            return
        status["_seen"] = time.monotonic()
        self._announced[status["id"]] = status

    def online(self, device: str | None = None) -> list[dict[str, Any]]:
        workers = layout.online(self._announced, time.monotonic())
        return [w for w in workers if device is None or w.get("device_kind") == device]

    @property
    def environment(self) -> dict[str, Any]:
        """The environment of the workers a run with no device goes to (CPU ones first)."""
        for kind in ("cpu", "cuda"):
            found = self.online(kind)
            if found:
                self._last_env = {k: found[0].get(k) for k in ("torch_version", "device_kind", "device_name", "cuda_version")}
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
        run_id = uuid.uuid4().hex
        # Each delivery may take the run's wall limit plus the lease margin, and a dead worker's
        # run waits ACK_WAIT_S before its second delivery; past all that nobody waits for it.
        patience = layout.MAX_DELIVERIES * (limits.wall_s + layout.LEASE_MARGIN_S + layout.ACK_WAIT_S) + 30
        waiting: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        self._waiting[run_id] = waiting
        headers = {
            layout.REPLY_HEADER: layout.RESULTS_SUBJECT.format(web=self.web_id),
            layout.DEADLINE_HEADER: f"{time.time() + patience:.3f}",
            "Nats-Msg-Id": run_id,
        }
        try:
            try:
                ack = await self.js.publish(layout.RUN_SUBJECT.format(device=routed),
                                            RunRequest(run_id, code, limits, explain, device).encode(), headers=headers)  # fmt: skip
            except nats.js.errors.APIError as exc:
                if layout.is_queue_full(exc):
                    raise RunsFull() from None
                raise SandboxError(f"the workers' queue refused the run: {exc}") from None
            except (nats.errors.Error, OSError) as exc:  # NATS unreachable, reconnecting: 503 for now
                raise SandboxError(f"the workers' queue cannot be reached: {exc!r}") from None
            self._by_sequence[ack.seq] = run_id
            try:
                return await self._await_result(waiting, routed, time.monotonic() + patience)
            finally:
                self._by_sequence.pop(ack.seq, None)
        finally:
            self._waiting.pop(run_id, None)

    async def _await_result(self, waiting: asyncio.Future[RunResult], device: str, deadline: float) -> RunResult:
        """The result, or "lost" when nothing will ever send one: JetStream gave up on the run
        (`_on_gave_up`), no worker of its kind has been online for a while (JetStream only gives
        up while some worker is asking for runs), or the run's whole patience ran out."""
        nobody_since: float | None = None
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(waiting), 0.5)
            except TimeoutError:
                pass
            now = time.monotonic()
            nobody_since = None if self.online(device) else (nobody_since or now)
            if now > deadline or (nobody_since is not None and now - nobody_since > layout.NO_WORKER_GRACE_S):
                self.lost += 1
                return self._lost(NO_WORKER_LEFT.format(kind=device.upper()) if nobody_since else LOST)

    def _lost(self, message: str = LOST) -> RunResult:
        return RunResult(status="killed", message=message, environment=Environment.from_dict(self.environment))

    async def _on_result(self, msg: Msg) -> None:
        run_id = (msg.headers or {}).get("Ampquiz-Run", "")
        waiting = self._waiting.get(run_id)
        taken = waiting is not None and not waiting.done()
        if taken:  # first the learner's result, then the worker's receipt: it is off their clock
            try:
                waiting.set_result(result_from_claim(msg.data))
            except BadMessage as exc:
                log.error("a worker sent a malformed result for run %s: %s", run_id, exc)
                waiting.set_result(RunResult(status="killed", message=f"The worker's answer could not be read: {exc}",
                                             environment=Environment.from_dict(self.environment)))  # fmt: skip
        # A second answer to a run delivered twice, or one nobody waits for any more, is dropped.
        await msg.respond(b"taken" if taken else b"not waited for")

    async def _on_gave_up(self, msg: Msg) -> None:
        """JetStream stopped redelivering a run (every delivery's worker died): it is lost."""
        try:
            sequence = int(json.loads(msg.data).get("stream_seq"))
        except (ValueError, TypeError, AttributeError):
            return
        run_id = self._by_sequence.get(sequence)
        waiting = self._waiting.get(run_id or "")
        if waiting is not None and not waiting.done():
            self.lost += 1
            log.warning("run %s lost: its worker died on every delivery", run_id)
            waiting.set_result(self._lost())

    def status(self) -> dict[str, Any]:
        workers = [{k: v for k, v in w.items() if not k.startswith("_")} for w in self.online()]
        where = self.settings.workers_url.rsplit("@", 1)[-1]  # never a password in /healthz
        return {"kind": "remote", "url": where, "connected": bool(self.nc.is_connected),
                "workers": workers, "lost": self.lost}  # fmt: skip

    async def close(self) -> None:
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.cancel()
        await self.nc.drain()
