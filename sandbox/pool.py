"""`Sandbox`: the warm pool the rest of the product calls. One call: `run(code, limits) -> RunResult`.

The pool keeps `workers` runners prepared (forked, isolated, warmed up, waiting for code), so a run
pays only for its own code. A runner serves exactly one snippet and is then destroyed; a
background thread asks the zygote for the next one.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox import wire
from sandbox.isolation import SAFE_ENV
from sandbox.limits import Limits
from sandbox.result import Environment, ExceptionInfo, RunResult, WarningInfo

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
_NEVER_HIDE = {"/", "/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/dev", "/sys", "/tmp", "/var"}
_SIGNAL_WORDS = {
    signal.SIGSEGV: "a segmentation fault (SIGSEGV)",
    signal.SIGABRT: "an abort (SIGABRT)",
    signal.SIGBUS: "a bus error (SIGBUS)",
    signal.SIGFPE: "a floating-point exception (SIGFPE)",
    signal.SIGKILL: "SIGKILL",
    signal.SIGTERM: "SIGTERM",
    signal.SIGXCPU: "the CPU time limit (SIGXCPU)",
}


# Every protection a fully privileged Linux host gives a run; what is missing is said at start.
ALL_PROTECTIONS = (
    "net-namespace", "pid-namespace", "mount-namespace", "ipc-namespace", "private-proc",
    "private-tmp", "hidden-paths", "unprivileged-uid", "cgroup-memory", "cgroup-pids", "rlimits",
)
log = logging.getLogger("ampquiz.sandbox")


class SandboxError(RuntimeError):
    """The pool itself failed (not the snippet): the zygote died or could not start."""


@dataclass
class _Slot:
    keeper_pid: int
    sock: socket.socket
    out_fd: int
    err_fd: int
    runner_pid: int | None = None
    cgroup: dict[str, str] | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    closed: bool = False

    def kill(self) -> None:
        """Kill the run and everything it started (the runner is pid 1 of its namespace)."""
        for pid in (self.runner_pid, self.keeper_pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            os.killpg(self.keeper_pid, signal.SIGKILL)
        except OSError:
            pass

    def close(self) -> None:
        """Kill, remove the cgroup, release descriptors. Idempotent: fd numbers get reused."""
        if self.closed:
            return
        self.closed = True
        self.kill()
        if self.cgroup:
            from sandbox.cgroup import RunCgroup

            RunCgroup({k: Path(v) for k, v in self.cgroup.items()}).remove()
        self.sock.close()
        for fd in (self.out_fd, self.err_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class _FairGate:
    """At most `n` holders, admitted in arrival order (a Semaphore lets a late caller barge in)."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._cond = threading.Condition()
        self._queue: collections.deque[object] = collections.deque()

    def __enter__(self) -> None:
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            self._cond.wait_for(lambda: self._free > 0 and self._queue[0] is ticket)
            self._queue.popleft()
            self._free -= 1
            self._cond.notify_all()

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()


def default_hidden_paths() -> list[str]:
    """What a snippet must not read: the server's working tree (config, database), home folders."""
    return [os.getcwd(), os.path.expanduser("~"), "/root", "/home"]


class Sandbox:
    """A pool of isolated, pre-forked torch processes. Thread-safe; use as a context manager."""

    def __init__(
        self,
        workers: int = 2,
        *,
        hide: list[str] | None = None,
        allow_cuda: bool = True,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.workers = workers
        self.start_timeout_s = start_timeout_s
        hidden = [*default_hidden_paths(), *(hide or [])]
        keep = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.join(_PACKAGE_ROOT, "sandbox")}
        keep |= {str(Path(p).resolve()) for p in sys.path if p and Path(p).is_dir() and "site-packages" in p}
        self._config = {
            "hide": sorted({str(Path(p).resolve()) for p in hidden if str(Path(p).resolve()) not in _NEVER_HIDE}),
            "keep": sorted(keep),
            "tmp_bytes": 64 * 1024 * 1024,
            "uid_base": 200000,
            "allow_cuda": allow_cuda,
        }
        self._zygote: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._ready: queue.Queue[_Slot] = queue.Queue()
        self._wanted = threading.Semaphore(0)
        self._busy = _FairGate(workers)
        self._closing = threading.Event()
        self._refiller: threading.Thread | None = None
        self._graveyard: queue.Queue[_Slot | None] = queue.Queue()
        self._undertaker: threading.Thread | None = None
        self.environment: dict[str, Any] = {}
        self.cgroups = False

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> Sandbox:
        if self._zygote is not None:
            return self
        parent_end, child_end = socket.socketpair()
        env = dict(SAFE_ENV, PYTHONPATH=_PACKAGE_ROOT)
        self._zygote = subprocess.Popen(
            [sys.executable, "-m", "sandbox.zygote", str(child_end.fileno()), json.dumps(self._config)],
            pass_fds=[child_end.fileno()],
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
        )
        child_end.close()
        self._control = parent_end
        parent_end.settimeout(self.start_timeout_s)
        hello = wire.recv(parent_end)
        if hello is None:
            raise SandboxError("the sandbox zygote exited while starting (is torch importable?)")
        parent_end.settimeout(None)
        self.environment = hello["environment"]
        self.cgroups = hello["cgroups"]
        self._refiller = threading.Thread(target=self._refill, name="sandbox-refill", daemon=True)
        self._refiller.start()
        self._undertaker = threading.Thread(target=self._bury, name="sandbox-cleanup", daemon=True)
        self._undertaker.start()
        for _ in range(self.workers):
            self._wanted.release()
        missing = self.missing_protections()
        if missing:
            log.warning(
                "sandbox protections OFF on this host: %s (snippets still never run in this process)",
                ", ".join(missing),
            )
        return self

    def missing_protections(self) -> list[str]:
        """Protections this host refused (e.g. namespaces in an unprivileged container)."""
        have = set(self.protections)
        return [p for p in ALL_PROTECTIONS if p not in have]

    def close(self) -> None:
        if self._zygote is None:
            return
        self._closing.set()
        self._wanted.release()
        if self._refiller:
            self._refiller.join(timeout=5)
        while not self._ready.empty():
            self._ready.get_nowait().close()
        self._graveyard.put(None)
        if self._undertaker:
            self._undertaker.join(timeout=10)
        try:
            assert self._control is not None
            wire.send(self._control, {"type": "stop"})
        except OSError:
            pass
        try:
            self._zygote.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._zygote.kill()
            self._zygote.wait()
        if self._control:
            self._control.close()
        self._zygote = None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def protections(self) -> list[str]:
        """What isolation a run gets on this host; measured by preparing a runner."""
        slot = self._ready.get(timeout=self.start_timeout_s)
        self._ready.put(slot)
        return list(slot.environment.get("protections", []))

    def _refill(self) -> None:
        """Keeps `workers` runners prepared; the only thread that talks to the zygote.

        It only asks for the fork; each new runner prepares itself (namespaces, mounts, warm-up)
        while the next is forked, and a short-lived thread waits for it to say it is ready.
        """
        while True:
            self._wanted.acquire()
            if self._closing.is_set():
                return
            try:
                slot = self._fork_slot()
            except (OSError, ValueError, SandboxError):
                if self._closing.is_set():
                    return
                time.sleep(0.5)
                self._wanted.release()
                continue
            threading.Thread(target=self._await_ready, args=(slot,), daemon=True).start()

    def _await_ready(self, slot: _Slot) -> None:
        try:
            self._wait_until_ready(slot)
        except (OSError, ValueError, SandboxError):
            slot.close()
            if not self._closing.is_set():
                self._wanted.release()  # try again with a fresh one
            return
        if self._closing.is_set():
            slot.close()
        else:
            self._ready.put(slot)

    def _bury(self) -> None:
        while (slot := self._graveyard.get()) is not None:
            slot.close()

    def _fork_slot(self) -> _Slot:
        assert self._control is not None
        wire.send(self._control, {"type": "spawn"})
        reply, fds = wire.recv_with_fds(self._control, 3)
        if reply is None or len(fds) != 3:
            raise SandboxError("the sandbox zygote stopped answering")
        return _Slot(reply["keeper_pid"], socket.socket(fileno=fds[0]), fds[1], fds[2])

    def _wait_until_ready(self, slot: _Slot) -> None:
        """Until the runner is prepared, so a run never waits for set-up."""
        slot.sock.settimeout(self.start_timeout_s)
        while True:
            msg = wire.recv(slot.sock)
            if msg is None or msg["type"] == "crash":
                raise SandboxError(msg["message"] if msg else "a sandbox runner died while starting")
            if msg["type"] == "hello":
                slot.runner_pid = msg["runner_pid"]
                slot.cgroup = msg.get("cgroup")
            elif msg["type"] == "ready":
                slot.environment = msg["environment"]
                break
        slot.sock.settimeout(None)

    # ---- running ---------------------------------------------------------------------------

    def run(
        self, code: str, limits: Limits | None = None, *, explain: bool = False, device: str | None = None
    ) -> RunResult:
        """Run `code` once in a fresh isolated process. `device="cuda"` on a CPU host: `unavailable`."""
        limits = limits or Limits()
        if self._zygote is None:
            raise SandboxError("the sandbox is not started: use `with Sandbox() as sb:` or call start()")
        if device == "cuda" and self.environment.get("device_kind") != "cuda":
            return RunResult(
                status="unavailable",
                message="This snippet needs a CUDA GPU, and this sandbox has none (CPU-only host).",
                environment=Environment(**self.environment),
            )
        with self._busy:
            try:
                slot = self._ready.get(timeout=self.start_timeout_s)
            except queue.Empty:
                raise SandboxError("no sandbox runner became ready in time") from None
            self._wanted.release()
            try:
                return self._execute(slot, code, limits, explain)
            finally:
                # Tearing down (kill, cgroup removal) is off the learner's clock.
                self._graveyard.put(slot)

    async def run_async(self, code: str, limits: Limits | None = None, **kwargs: Any) -> RunResult:
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, lambda: self.run(code, limits, **kwargs))

    def _execute(self, slot: _Slot, code: str, limits: Limits, explain: bool) -> RunResult:
        started = time.perf_counter()
        wire.send(slot.sock, {"type": "run", "code": code, "limits": limits.to_dict(), "explain": explain})
        deadline = started + limits.wall_s
        streams = {slot.out_fd: bytearray(), slot.err_fd: bytearray()}
        reader = wire.Reader()
        result: dict[str, Any] | None = None
        exit_info: dict[str, Any] | None = None
        ended_by: str | None = None
        sel = selectors.DefaultSelector()
        sel.register(slot.sock, selectors.EVENT_READ)
        sel.register(slot.out_fd, selectors.EVENT_READ)
        sel.register(slot.err_fd, selectors.EVENT_READ)
        open_streams = 2
        try:
            while exit_info is None or open_streams:
                timeout = deadline - time.perf_counter()
                if result is not None:
                    # The runner flushed its output before reporting, so what it printed is already
                    # in the pipes: drain that and return without waiting for the process to exit.
                    timeout = 0
                elif exit_info is not None:
                    timeout = min(timeout, 0.2)  # the run is over: only drain what is already written
                if timeout <= 0 and result is None:
                    if exit_info is None:
                        ended_by = "timeout"
                    break
                events = sel.select(max(timeout, 0))
                if not events and (exit_info is not None or result is not None):
                    break
                for key, _ in events:
                    if key.fileobj is slot.sock:
                        data = slot.sock.recv(65536)
                        if not data:
                            sel.unregister(slot.sock)
                            exit_info = exit_info or {"type": "exit", "signal": None, "code": None}
                            continue
                        for msg in reader.feed(data):
                            if msg["type"] == "result":
                                result = msg
                            elif msg["type"] in ("exit", "crash"):
                                exit_info = msg
                    else:
                        fd = key.fileobj
                        data = os.read(fd, 65536)
                        if not data:
                            sel.unregister(fd)
                            open_streams -= 1
                            continue
                        streams[fd] += data
                        if len(streams[fd]) > limits.output_bytes:
                            del streams[fd][limits.output_bytes :]
                            ended_by = ended_by or "output_limit"
                if ended_by == "output_limit":
                    break
        finally:
            sel.close()
        if ended_by:
            slot.kill()  # now, before reading status files
        duration_ms = (time.perf_counter() - started) * 1000
        return self._result(slot, limits, result, exit_info, ended_by, streams, duration_ms)

    def _result(
        self,
        slot: _Slot,
        limits: Limits,
        result: dict[str, Any] | None,
        exit_info: dict[str, Any] | None,
        ended_by: str | None,
        streams: dict[int, bytearray],
        duration_ms: float,
    ) -> RunResult:
        stdout = streams[slot.out_fd].decode("utf-8", "replace")
        stderr = streams[slot.err_fd].decode("utf-8", "replace")
        base = result or {}
        env = base.get("environment") or slot.environment or self.environment
        out = RunResult(
            status=base.get("status", "killed"),
            stdout=stdout,
            stderr=stderr,
            exception=ExceptionInfo(**base["exception"]) if base.get("exception") else None,
            warnings=[WarningInfo(**w) for w in base.get("warnings", [])],
            duration_ms=round(duration_ms, 2),
            environment=Environment(**env),
            message=base.get("message", ""),
            explanation=base.get("explanation"),
        )
        oom = False
        if slot.cgroup:
            from sandbox.cgroup import RunCgroup

            oom = RunCgroup({k: Path(v) for k, v in slot.cgroup.items()}).oom_killed()
        sig = (exit_info or {}).get("signal")
        if ended_by == "timeout":
            out.status, out.message = "timeout", f"Stopped after the wall-time limit of {limits.wall_s:g} s."
        elif ended_by == "output_limit":
            out.status = "output_limit"
            out.message = f"Output was cut at {limits.output_bytes} bytes and the run was stopped."
        elif oom:
            out.status, out.message = "memory", f"Killed for using more than {limits.memory_bytes} bytes of memory."
        elif result is None and (sig == signal.SIGXCPU or (sig and (exit_info or {}).get("cpu_s", 0) >= limits.cpu_s)):
            out.status, out.message = "timeout", f"Stopped at the CPU-time limit of {limits.cpu_s} s."
        elif result is None:
            out.status = "killed"
            if exit_info and exit_info.get("type") == "crash":
                out.message = exit_info["message"]
            elif sig:
                out.message = f"The process was ended by {_SIGNAL_WORDS.get(sig, f'signal {sig}')}."
            elif exit_info and exit_info.get("code") is not None:
                out.message = f"The process exited with code {exit_info['code']} before finishing (os._exit?)."
            else:
                out.message = "The process ended without reporting a result."
        return out
