"""Where a run goes: the one seam between the web (and the CLI) and whatever executes snippets.

Three kinds of `Runs`, chosen by `AMPQUIZ_WORKERS_URL` (`open_runs`):

- empty (the embedded default): `LocalRuns`, a sandbox pool inside this process;
- `unix:///path/to/socket`: `PoolHostRuns`, a pool in another process of this host, shared by
  the web processes of `ampquiz serve --processes N` (`app.runs.pool_host`);
- `nats://host:port`: `RemoteRuns`, sandbox workers on other machines (`ampquiz worker`), fed
  through a NATS JetStream work queue (`app.runs.remote`, `app.runs.worker`).

Each answers the same questions: can a run for this device be taken at all (`refusal`), run it
(`run`, async, never blocking the event loop), where does a run with no device land
(`environment`), how many runs may be in flight (`workers`), and what is online (`status`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from sandbox import Limits, RunResult

if TYPE_CHECKING:
    from app.settings import Settings

DEVICES = ("cpu", "cuda")
"""What a run may ask for; `None` means "wherever", the question's `requires: any`."""


class RunsFull(Exception):
    """The backend's own bound on waiting runs is reached (remote workers' shared work queue), or
    the turns it keeps refused the run (the pool host: a learner's or address's share, or the
    room, of every web process together): the web answers as for its own full queue, 429 with
    Retry-After. `reason` and `limit` are `QueueFull`'s, when the backend says them."""

    def __init__(
        self, retry_after_s: int | None = None, reason: str = "queue", limit: int = 0
    ) -> None:
        super().__init__(f"the backend has no room for the run ({reason})")
        self.retry_after_s = retry_after_s
        self.reason = reason
        self.limit = limit


class Runs(Protocol):
    workers: int
    """Runs that may be executing at once: the web keeps no more than this many in flight."""
    keeps_turns: bool
    """The backend admits and orders runs itself, for every web process that uses it (the pool
    host of `serve --processes N`): the web's queue then hands each run on at once, saying whose
    it is and in which lane (`run_in_turn`), and keeps no turns of its own. A share kept in each
    process was a share per process: with two, a client had twice what it is allowed."""

    @property
    def environment(self) -> dict[str, Any]:
        """Where a run with no device asked for lands (device kind, torch version, device name)."""
        ...

    @property
    def alive(self) -> bool:
        """Something can run code now."""
        ...

    def devices(self) -> list[str]:
        """The devices a run may ask for now (what the pool or the workers online have)."""
        ...

    def refusal(self, device: str | None, subject: str) -> RunResult | None:
        """An `unavailable` result when nothing online can run on `device`, at once; else None."""
        ...

    async def run(
        self, code: str, limits: Limits, *, explain: bool = False, device: str | None = None
    ) -> RunResult: ...

    def status(self) -> dict[str, Any]:
        """What /healthz and `ampquiz workers` show: the kind of backend and what is online."""
        ...

    async def close(self) -> None: ...


async def open_runs(settings: Settings) -> Runs:
    """The backend `settings.workers_url` names, started."""
    url = settings.workers_url
    if not url:
        from app.runs.local import LocalRuns

        return await LocalRuns.start(settings)
    if url.startswith("unix://"):
        from app.runs.pool_host import PoolHostRuns

        return await PoolHostRuns.connect(url.removeprefix("unix://"), settings)
    from app.runs.remote import RemoteRuns

    return await RemoteRuns.connect(url, settings)
