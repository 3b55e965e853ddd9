"""Remote workers seen as blocking pools, one per device kind, for commands that think in pools
(`ampquiz verify --remote` hands each to `verify_questions` as it would a local `Sandbox`).

The `RemoteRuns` client lives on an event loop in a thread of its own; `run` waits for it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from app.runs.jetstream import BrokerRefused
from app.runs.remote import RemoteRuns
from app.runs.signing import nobody_online
from app.settings import Settings
from sandbox import Limits, RunResult


class MixedWorkers(Exception):
    """Workers of one device kind run different torch versions: their runs prove different things."""


class NoWorkerOnline(Exception):
    """No worker believed is online (the message says so, and why it may seem so)."""


class DevicePool:
    """The workers of one device kind, as a blocking pool."""

    def __init__(self, runs: RemoteRuns, device: str, loop: asyncio.AbstractEventLoop) -> None:
        self.runs, self.device, self.loop = runs, device, loop
        workers = runs.online(device)
        versions = sorted({str(w.get("torch_version")) for w in workers})
        if len(versions) > 1:
            raise MixedWorkers(
                f"{device} workers run torch {' and '.join(versions)}: verify needs one environment per device"
            )
        first = workers[0]
        self.environment: dict[str, Any] = {
            k: first.get(k)
            for k in (
                "torch_version",
                "device_kind",
                "device_name",
                "cuda_version",
                "python_version",
            )
        }
        self.workers = sum(int(w.get("slots") or 1) for w in workers)

    def run(
        self,
        code: str,
        limits: Limits | None = None,
        *,
        explain: bool = False,
        device: str | None = None,
    ) -> RunResult:
        job = self.runs.run(code, limits or Limits(), explain=explain, device=self.device)
        return asyncio.run_coroutine_threadsafe(job, self.loop).result()


@contextmanager
def remote_pools(url: str, settings: Settings | None = None) -> Iterator[list[DevicePool]]:
    """A pool per device kind online at `url`; NoWorkerOnline when there is none."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="remote-runs", daemon=True)
    thread.start()
    settings = settings or Settings.from_env(workers_url=url)  # the workers' key, with the rest
    try:
        runs = asyncio.run_coroutine_threadsafe(
            RemoteRuns.connect(url, settings, discover_s=1.0), loop
        ).result()
    except BrokerRefused as exc:  # no credentials for the NATS server: said as plainly
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        raise NoWorkerOnline(str(exc)) from None
    try:
        pools = [DevicePool(runs, device, loop) for device in runs.devices()]
        if not pools:
            raise NoWorkerOnline(nobody_online(runs.broker.where(), runs.other_key))
        yield pools
    finally:
        asyncio.run_coroutine_threadsafe(runs.close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
