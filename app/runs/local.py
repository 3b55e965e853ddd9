"""`LocalRuns`: the sandbox pool in this process (the embedded default, and every test's pool).

`Sandbox.run` blocks a thread while the snippet runs, so runs go to a thread pool as wide as the
sandbox: the event loop never waits.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sandbox import Limits, RunResult, Sandbox

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger("ampquiz.runs")


class LocalRuns:
    keeps_turns = False  # the web's queue in this process keeps them

    def __init__(self, pool: Sandbox, *, owned: bool = False) -> None:
        self.pool = pool
        self.workers = int(pool.workers)
        self._owned = owned
        self._executor = ThreadPoolExecutor(
            max_workers=self.workers, thread_name_prefix="sandbox-run"
        )

    @classmethod
    async def start(cls, settings: Settings) -> LocalRuns:
        """A pool of `settings.sandbox_workers`, hiding the server's data folder from snippets."""
        pool = Sandbox(workers=settings.sandbox_workers, hide=[str(settings.data_dir().resolve())])
        await asyncio.to_thread(pool.start)
        log.info("sandbox: %d workers on %s", pool.workers, pool.environment.get("device_kind"))
        return cls(pool, owned=True)

    @property
    def environment(self) -> dict[str, Any]:
        return self.pool.environment

    @property
    def alive(self) -> bool:
        # A pool whose zygote died restarts it; until then it cannot run code.
        return bool(getattr(self.pool, "alive", True))

    def devices(self) -> list[str]:
        return pool_devices(self.environment)

    def refusal(self, device: str | None, subject: str) -> RunResult | None:
        return pool_refusal(self.environment, device, subject)

    async def run(
        self, code: str, limits: Limits, *, explain: bool = False, device: str | None = None
    ) -> RunResult:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, lambda: self.pool.run(code, limits, explain=explain, device=device)
        )

    def status(self) -> dict[str, Any]:
        return {"kind": "local", "workers": [local_worker_status(self.pool, "this process")]}

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._owned:
            await asyncio.to_thread(self.pool.close)


def pool_devices(environment: dict[str, Any]) -> list[str]:
    """What one pool can run on: a CUDA host runs CPU code too."""
    return ["cpu", "cuda"] if environment.get("device_kind") == "cuda" else ["cpu"]


def pool_refusal(environment: dict[str, Any], device: str | None, subject: str) -> RunResult | None:
    """CUDA asked of a pool on a CPU host: `unavailable`, at once (no worker needed)."""
    if device == "cuda" and "cuda" not in pool_devices(environment):
        return RunResult.needs_cuda(environment, subject)
    return None


def local_worker_status(pool: Sandbox, where: str) -> dict[str, Any]:
    """One pool as a worker line of /healthz and `ampquiz workers` (the same shape a remote
    worker announces)."""
    env = pool.environment
    return {
        "id": where,
        "device_kind": env.get("device_kind"),
        "device_name": env.get("device_name"),
        "torch_version": env.get("torch_version"),
        "cuda_version": env.get("cuda_version"),
        "python_version": env.get("python_version"),
        "slots": pool.workers,
        "alive": bool(getattr(pool, "alive", True)),
    }
