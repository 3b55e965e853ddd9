"""`Sandbox`: the warm pool the rest of the product calls. One call: `run(code, limits) -> RunResult`.

The pool keeps `workers` + 1 runners prepared (forked, isolated, warmed up, waiting for code), so a
run pays only for its own code. A runner serves exactly one snippet and is then destroyed; a
background thread asks the zygote for the next one (through `sandbox.zygote_link`), and restarts
the zygote if it died.

Runs in: the server (the web server's or the CLI's process); it starts the zygote, never runs code.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

from sandbox import ending, wire
from sandbox.cgroup import RunCgroup
from sandbox.collect import RunnerGone, collect
from sandbox.fair_gate import FairGate
from sandbox.limits import Limits
from sandbox.result import RunResult
from sandbox.slot import Slot
from sandbox.visible import allowed_paths, hidden_paths
from sandbox.zygote_link import SandboxError, ZygoteLink

__all__ = ["ALL_PROTECTIONS", "SPARE_RUNNERS", "Sandbox", "SandboxError"]

# Every protection a fully privileged Linux host gives a run; what is missing is said at start.
ALL_PROTECTIONS = (
    "net-namespace", "pid-namespace", "mount-namespace", "ipc-namespace", "uts-namespace",
    "cgroup-namespace", "private-proc", "proc-pids-only", "private-tmp", "allow-listed-filesystem", "minimal-dev",
    "hidden-paths", "read-only-root", "unprivileged-uid", "syscall-filter", "cgroup-memory",
    "cgroup-pids", "cpu-cap", "disk-io-cap", "rlimits",
)  # fmt: skip
SPARE_RUNNERS = 1
log = logging.getLogger("ampquiz.sandbox")


class Sandbox:
    """A pool of isolated, pre-forked torch processes. Thread-safe; use as a context manager.

    `hide`: paths no snippet may see. A runner's root holds only what `allowed_paths` and the
    system folders name, so every other path is hidden already; `hide` still covers a path inside
    those (a secret under the interpreter's prefix, say), and is what hides anything at all on a
    host where the root cannot be built (the deny-list fallback of `sandbox.filesystem`).
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        hide: list[str] | None = None,
        allow_cuda: bool = True,
        start_timeout_s: float = 120.0,
        zygote_timeout_s: float | None = None,
    ) -> None:
        self.workers = workers
        self.start_timeout_s = start_timeout_s
        """How long a runner may take to be prepared (and `start` to wait for the first one)."""
        self.zygote_timeout_s = start_timeout_s if zygote_timeout_s is None else zygote_timeout_s
        """How long the zygote may take to start: importing torch, several seconds on a busy host."""
        config = {
            "hide": hidden_paths(hide or []),
            "keep": allowed_paths(),
            "tmp_bytes": 64 * 1024 * 1024,
            "uid_base": 200000,
            "allow_cuda": allow_cuda,
        }
        self._link = ZygoteLink(config, self.zygote_timeout_s)
        self._cgroups_work = False
        """Whether a runner of this pool has joined a cgroup: from then on, one that cannot is refused."""
        self._ready: queue.Queue[Slot] = queue.Queue()
        self._ready_lock = threading.Lock()
        self._wanted = threading.Semaphore(0)
        """Runners to fork: released once per runner used up or failed."""
        self._deferred = threading.local()
        """`owed`: replacements a `results_first` block on this thread holds back, None outside one."""
        self._busy = FairGate(workers)
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._graveyard: queue.Queue[Slot | None] = queue.Queue()
        self._to_prepare: queue.Queue[Slot | None] = queue.Queue()
        """Runners forked and not yet ready, for the `sandbox-prepare` threads to wait on."""
        self.last_failure: str | None = None
        """Why the last runner that failed while preparing failed, if one did."""
        self._failed_in_a_row = 0

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> Sandbox:
        if self._link.process is not None:
            return self
        self._closing.clear()
        try:
            self._link.start()
        except SandboxError:
            self._link.forget()  # not started: `alive` is False, and start() may be tried again
            raise
        self._threads = [
            threading.Thread(target=self._refill, name="sandbox-refill", daemon=True),
            threading.Thread(target=self._bury, name="sandbox-cleanup", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        # Threads that wait for new runners to be ready, started once: a thread per runner cost
        # the server a thread's start and stack per run.
        self._to_prepare = queue.Queue()  # each start's threads have their own
        for _ in range(self.workers + SPARE_RUNNERS):
            threading.Thread(
                target=self._prepare_loop,
                args=(self._to_prepare,),
                name="sandbox-prepare",
                daemon=True,
            ).start()
        # One runner more than workers: while both workers run, the next one is already being
        # prepared, so back-to-back runs wait less (and no core idles while a runner sets up).
        for _ in range(self.workers + SPARE_RUNNERS):
            self._wanted.release()
        try:
            missing = self.missing_protections()
        except SandboxError:
            self.close(wait_s=0)  # no runner can be prepared here: leave nothing running behind
            raise
        if missing:
            log.warning(
                "sandbox protections OFF on this host: %s (snippets still never run in this process)",
                ", ".join(missing),
            )
        return self

    @property
    def zygote(self) -> subprocess.Popen | None:
        """The zygote's process (its pid, whether it lives): for tests and benchmarks."""
        return self._link.process

    @property
    def environment(self) -> dict[str, Any]:
        """What the zygote found on this host (torch's version, the device), said at its start."""
        return self._link.environment

    @property
    def cgroups(self) -> bool:
        return self._link.cgroups

    @property
    def huge_page_bytes(self) -> int:
        """How much of the zygote's heap is on 2 MiB pages (cheaper forks); 0 where the host refused."""
        return self._link.huge_page_bytes

    def missing_protections(self) -> list[str]:
        """Protections this host refused (e.g. namespaces in an unprivileged container)."""
        have = set(self.protections)
        return [p for p in ALL_PROTECTIONS if p not in have]

    @property
    def alive(self) -> bool:
        """The zygote is running (runs can be prepared). The refill thread restarts a dead one."""
        return self._link.alive

    def close(self, wait_s: float = 10.0) -> None:
        """Stop preparing runners, let runs in flight finish (up to `wait_s`), then tear down."""
        if self._link.process is None:
            return
        self._closing.set()
        self._wanted.release()
        self._busy.wait_idle(wait_s)
        with self._ready_lock:
            while not self._ready.empty():
                self._ready.get_nowait().close()
        self._graveyard.put(None)
        for _ in range(self.workers + SPARE_RUNNERS):
            self._to_prepare.put(
                None
            )  # not joined: one may still wait on a runner the zygote's stop ends
        for thread in self._threads:
            thread.join(timeout=10)
        self._link.stop()

    def __enter__(self) -> Sandbox:  # noqa: PYI034 - start() returns self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def protections(self) -> list[str]:
        """What isolation a run gets on this host; measured by preparing a runner."""
        try:
            slot = self._ready.get(timeout=self.start_timeout_s)
        except queue.Empty:
            raise self._not_ready() from None
        self._ready.put(slot)
        return list(slot.environment.get("protections", []))

    def _not_ready(self) -> SandboxError:
        why = f": the last one failed with {self.last_failure}" if self.last_failure else ""
        return SandboxError(f"no sandbox runner became ready in {self.start_timeout_s:g} s{why}")

    # ---- keeping runners prepared -------------------------------------------------------

    def _refill(self) -> None:
        """Keeps `workers` + `SPARE_RUNNERS` runners prepared; the only thread that talks to the zygote.

        It only asks for the fork; each new runner prepares itself (namespaces, mounts, warm-up)
        while the next is forked, and a `sandbox-prepare` thread waits for it to say it is ready.
        """
        backoff = 0.5
        while True:
            self._wanted.acquire()
            if self._closing.is_set():
                return
            try:
                slot = self._link.fork()
                backoff = 0.5
            except (OSError, ValueError, SandboxError) as exc:
                if self._closing.is_set():
                    return
                self._wanted.release()
                if not self.alive:
                    log.error("sandbox zygote died (%s); restarting it", exc)
                    try:
                        self._link.start()
                    except (OSError, SandboxError) as again:
                        log.error("sandbox zygote restart failed: %s", again)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            self._to_prepare.put(slot)

    def _prepare_loop(self, slots: queue.Queue[Slot | None]) -> None:
        while (slot := slots.get()) is not None:
            self._await_ready(slot)

    def _await_ready(self, slot: Slot) -> None:
        try:
            self._wait_until_ready(slot)
        except (OSError, ValueError, SandboxError) as exc:
            slot.close()
            if self._closing.is_set():
                return  # the pool is closing: its zygote took the runner with it
            with self._ready_lock:
                self._failed_in_a_row += 1
                failures = self._failed_in_a_row
                self.last_failure = str(exc) or repr(exc)
            if failures in (1, 10, 100, 1000):
                log.error("a sandbox runner could not be prepared (%d in a row): %s", failures, exc)
            # A runner that fails while preparing tends to fail the same way next time (the host
            # refuses a step): try again with a fresh one, but never in a loop that eats the CPU.
            if not self._closing.wait(min(0.05 * 2 ** min(failures, 10), 30.0)):
                self._wanted.release()
            return
        with self._ready_lock:
            self._failed_in_a_row = 0
            if self._closing.is_set():
                slot.close()
            else:
                self._ready.put(slot)

    def _bury(self) -> None:
        while (slot := self._graveyard.get()) is not None:
            slot.close()

    def _wait_until_ready(self, slot: Slot) -> None:
        """Until the runner is prepared, so a run never waits for set-up."""
        slot.sock.settimeout(self.start_timeout_s)
        while True:
            msg = wire.recv(slot.sock)
            if msg is None or msg["type"] in ("crash", "exit"):
                said = msg.get("message") if msg else None
                raise SandboxError(said or "a sandbox runner died while starting")
            if msg["type"] == "hello":
                slot.cgroup = msg.get("cgroup")
                if slot.cgroup:
                    self._cgroups_work = True
                elif self._cgroups_work:
                    # Runners here have joined cgroups (memory, process and CPU caps): one that
                    # could not is refused rather than run without them (a host out of cgroups).
                    raise SandboxError(
                        "a sandbox runner could not make its cgroup, so it would run without its caps"
                    )
            elif msg["type"] == "ready":
                slot.environment = msg["environment"]
                break
        slot.sock.settimeout(None)
        slot.watch = ending.watch(slot.pid)
        if slot.cgroup:  # the default caps, now, so that a run with default limits writes none
            cgroup = RunCgroup.from_paths(slot.cgroup)
            slot.base_memory = cgroup.usage_bytes()
            slot.base_tasks = cgroup.tasks()
            slot.set_caps(Limits())

    # ---- running ---------------------------------------------------------------------------

    def run(
        self,
        code: str,
        limits: Limits | None = None,
        *,
        explain: bool = False,
        device: str | None = None,
    ) -> RunResult:
        """Run `code` once in a fresh isolated process. `device="cuda"` on a CPU host: `unavailable`."""
        limits = limits or Limits()
        if self._link.process is None or self._closing.is_set():
            raise SandboxError(
                "the sandbox is not started: use `with Sandbox() as sb:` or call start()"
            )
        if device == "cuda" and self.environment.get("device_kind") != "cuda":
            return RunResult.needs_cuda(self.environment)
        with self._busy:
            for _ in range(3):  # a prepared runner can die while it waits (its zygote died, say)
                try:
                    slot = self._ready.get(timeout=self.start_timeout_s)
                except queue.Empty:
                    raise self._not_ready() from None
                try:
                    return collect(slot, code, limits, explain)
                except RunnerGone:
                    continue
                finally:
                    # Tearing down (kill, cgroup removal) is off the learner's clock, and so is
                    # preparing the runner that replaces this one: see `results_first`.
                    self._graveyard.put(slot)
                    self._replace_one()
            raise SandboxError("the sandbox's prepared runners keep dying")

    @contextlib.contextmanager
    def results_first(self) -> Iterator[None]:
        """Runs made on this thread inside the block have their runners replaced when the block
        ends, not as each run returns: for a caller that still delivers the result somewhere (a
        worker sending it over the network).

        A replacement is prepared after the run it replaces, never during it: forking and
        preparing a runner while a run executes and its result travels (on a host of few cores)
        was measured to add about 1 ms to a trivial run, whatever the preparation's CPU priority.
        The spare runner (`SPARE_RUNNERS`) is what the next run takes meanwhile."""
        outer = getattr(self._deferred, "owed", None)
        if outer is not None:  # nested: the outermost block replaces them all
            yield
            return
        self._deferred.owed = 0
        try:
            yield
        finally:
            owed, self._deferred.owed = self._deferred.owed, None
            for _ in range(owed):
                self._wanted.release()

    def _replace_one(self) -> None:
        """A runner was used up: the refill thread forks its replacement, now or when this
        thread's `results_first` block ends."""
        if getattr(self._deferred, "owed", None) is not None:
            self._deferred.owed += 1
        else:
            self._wanted.release()
