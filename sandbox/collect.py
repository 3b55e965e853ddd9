"""One prepared runner (a slot) and the collection of one run from it: output, report, ending.

Everything that comes back from a run was produced next to untrusted code, so it is treated as
input: size-capped, shape-checked, and never allowed to outlast the run's wall time.

Runs in: the server (the pool's threads).
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox import wire
from sandbox.cgroup import RunCgroup
from sandbox.limits import Limits
from sandbox.result import STATUSES, Environment, ExceptionInfo, RunResult, WarningInfo

# A runner's report (explanation included) is far below this; past it, the run is cut off.
MAX_REPORT_BYTES = 4 * 1024 * 1024
# After the run reports or ends: the most time spent draining what is already in the pipes.
DRAIN_S = 0.2

_SIGNAL_WORDS = {
    signal.SIGSEGV: "a segmentation fault (SIGSEGV)",
    signal.SIGABRT: "an abort (SIGABRT)",
    signal.SIGBUS: "a bus error (SIGBUS)",
    signal.SIGFPE: "a floating-point exception (SIGFPE)",
    signal.SIGKILL: "SIGKILL",
    signal.SIGTERM: "SIGTERM",
    signal.SIGXCPU: "the CPU time limit (SIGXCPU)",
}


class RunnerGone(Exception):
    """The prepared runner died before it got the code (e.g. its zygote died): try another."""


@dataclass
class Slot:
    pid: int
    """The runner's, as the pool sees it; the runner leads its own session."""
    sock: socket.socket
    out_fd: int
    err_fd: int
    cgroup: dict[str, str] | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    closed: bool = False

    def kill(self) -> None:
        """Kill the run and everything it started (the runner is pid 1 of its namespace; where
        there is none, its session and cgroup still hold what it started)."""
        for kill in (os.kill, os.killpg):
            try:
                kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        """Kill, remove the cgroup, release descriptors. Idempotent: fd numbers get reused."""
        if self.closed:
            return
        self.closed = True
        self.kill()
        if self.cgroup:
            RunCgroup.from_paths(self.cgroup).remove()
        self.sock.close()
        for fd in (self.out_fd, self.err_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def collect(slot: Slot, code: str, limits: Limits, explain: bool) -> RunResult:
    """Send the code to a prepared runner and gather what happened, within `limits.wall_s`."""
    started = time.perf_counter()
    try:
        wire.send(slot.sock, {"type": "run", "code": code, "limits": limits.to_dict(), "explain": explain})
    except OSError as exc:
        raise RunnerGone(str(exc)) from exc
    deadline = started + limits.wall_s
    streams = {slot.out_fd: bytearray(), slot.err_fd: bytearray()}
    reader = wire.Reader()
    report: dict[str, Any] | None = None
    exit_info: dict[str, Any] | None = None
    ended_by: str | None = None
    report_bytes = 0
    drain_until = deadline
    sel = selectors.DefaultSelector()
    for fd in (slot.sock, slot.out_fd, slot.err_fd):
        sel.register(fd, selectors.EVENT_READ)
    try:
        while True:
            now = time.perf_counter()
            if report is None and exit_info is None and now >= deadline:
                ended_by = "timeout"
                break
            # Once the run has reported (or ended), only drain what is already written.
            stop = deadline if report is None and exit_info is None else min(deadline, drain_until)
            if now >= stop or not sel.get_map():
                break
            # After the report, poll without waiting: the runner flushed its output before
            # reporting, so returning need not wait for the process to exit.
            events = sel.select(0 if report is not None else stop - now)
            if not events and (report is not None or exit_info is not None):
                break
            for key, _ in events:
                if key.fileobj is slot.sock:
                    try:
                        data = slot.sock.recv(65536)
                    except ConnectionResetError:
                        # The runner died with the code still unread in its socket (killed with
                        # its zygote, say): an end of stream like any other.
                        data = b""
                    report_bytes += len(data)
                    if not data or report_bytes > MAX_REPORT_BYTES:
                        sel.unregister(slot.sock)
                        if data:
                            ended_by = "malformed"
                        exit_info = exit_info or {"type": "exit", "signal": None, "code": None}
                        drain_until = time.perf_counter() + DRAIN_S
                        continue
                    try:
                        messages = reader.feed(data)
                    except (ValueError, RecursionError):
                        messages, ended_by = [], "malformed"
                    for msg in messages:
                        kind = msg.get("type") if isinstance(msg, dict) else None
                        if kind == "result" and report is None:
                            report = msg
                        elif kind in ("exit", "crash"):
                            exit_info = msg
                    if ended_by == "malformed":
                        break
                    if report is not None or exit_info is not None:
                        # Stop listening to the socket: the rest of the run is noise to us.
                        sel.unregister(slot.sock)
                        drain_until = time.perf_counter() + DRAIN_S
                else:
                    fd = key.fileobj
                    data = os.read(fd, 65536)
                    if not data:
                        sel.unregister(fd)
                        continue
                    streams[fd] += data
                    if len(streams[fd]) > limits.output_bytes:
                        del streams[fd][limits.output_bytes :]
                        ended_by = ended_by or "output_limit"
            if ended_by in ("output_limit", "malformed"):
                break
    finally:
        sel.close()
    if ended_by or report is None:
        slot.kill()  # now, before reading status files
    duration_ms = (time.perf_counter() - started) * 1000
    return _result(slot, limits, report, exit_info, ended_by, streams, duration_ms)


def _text(value: Any, limit: int = 65536) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _from_report(report: dict[str, Any], fallback_env: dict[str, Any]) -> RunResult:
    """A RunResult from the runner's report, taking only well-formed fields (it came from next to
    untrusted code, which can write on the same socket)."""
    status = report.get("status")
    exc = report.get("exception")
    exception = None
    if isinstance(exc, dict):
        line = exc.get("line")
        exception = ExceptionInfo(
            type=_text(exc.get("type"), 200) or "Exception",
            message=_text(exc.get("message")),
            traceback=_text(exc.get("traceback")),
            line=line if isinstance(line, int) else None,
            source_line=_text(exc.get("source_line"), 500) or None,
        )
    warnings = []
    for w in report.get("warnings") or []:
        if isinstance(w, dict):
            line = w.get("line")
            warnings.append(
                WarningInfo(_text(w.get("category"), 200), _text(w.get("message"), 4096), line if isinstance(line, int) else None)
            )
    env = report.get("environment")
    env = env if isinstance(env, dict) else fallback_env
    explanation = report.get("explanation")
    return RunResult(
        status=status if status in STATUSES else "killed",
        exception=exception,
        warnings=warnings[:100],
        environment=Environment.from_dict(env),
        message=_text(report.get("message"), 4096),
        explanation=explanation if isinstance(explanation, dict) else None,
    )


def _result(
    slot: Slot,
    limits: Limits,
    report: dict[str, Any] | None,
    exit_info: dict[str, Any] | None,
    ended_by: str | None,
    streams: dict[int, bytearray],
    duration_ms: float,
) -> RunResult:
    fallback_env = slot.environment
    try:
        out = _from_report(report or {}, fallback_env)
    except (TypeError, ValueError):
        out = _from_report({}, fallback_env)
        ended_by = ended_by or "malformed"
    out.stdout = streams[slot.out_fd].decode("utf-8", "replace")
    out.stderr = streams[slot.err_fd].decode("utf-8", "replace")
    out.duration_ms = round(duration_ms, 2)
    oom = bool(slot.cgroup) and RunCgroup.from_paths(slot.cgroup or {}).oom_killed()
    info = exit_info or {}
    sig = info.get("signal") if isinstance(info.get("signal"), int) else None
    cpu_s = info.get("cpu_s") if isinstance(info.get("cpu_s"), (int, float)) else 0
    if ended_by == "timeout":
        out.status, out.message = "timeout", f"Stopped after the wall-time limit of {limits.wall_s:g} s."
    elif ended_by == "output_limit":
        out.status = "output_limit"
        out.message = f"Output was cut at {limits.output_bytes} bytes and the run was stopped."
    elif ended_by == "malformed":
        out.status, out.message = "killed", "The run wrote a malformed report on the sandbox's channel and was stopped."
    elif oom:
        out.status, out.message = "memory", f"Killed for using more than {limits.memory_bytes} bytes of memory."
    elif report is None and (sig == signal.SIGXCPU or (sig and cpu_s >= limits.cpu_s)):
        out.status, out.message = "timeout", f"Stopped at the CPU-time limit of {limits.cpu_s} s."
    elif report is None:
        out.status = "killed"
        if info.get("type") == "crash":
            out.message = _text(info.get("message"), 4096)
        elif sig:
            out.message = f"The process was ended by {_SIGNAL_WORDS.get(sig, f'signal {sig}')}."
        elif isinstance(info.get("code"), int):
            out.message = f"The process exited with code {info['code']} before finishing (os._exit?)."
        else:
            out.message = "The process ended without reporting a result."
    return out
