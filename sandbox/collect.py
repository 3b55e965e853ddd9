"""The collection of one run from a prepared runner (`sandbox.slot.Slot`): output, report, ending.

Everything that comes back from a run was produced next to untrusted code, so it is treated as
input: size-capped, shape-checked, and never allowed to outlast the run's wall time. The status
rests on what the snippet cannot write -- the wall clock, the output pipes, the cgroup's OOM count
and how the process ended (`sandbox.ending`) -- and the runner's report is believed only where
it agrees with them (`sandbox.claims`).

Runs in: the server (the pool's threads).
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import time
from typing import Any

from sandbox import wire
from sandbox.cgroup import RunCgroup
from sandbox.claims import Malformed, read_claim, shown
from sandbox.ending import CRASH_EXIT, EXIT_CODES, exit_status_while_exiting
from sandbox.limits import Limits
from sandbox.result import Environment, RunResult
from sandbox.slot import Slot

# A runner's report (explanation included) is far below these; past either, it is malformed.
# Honest bounds (sandbox.claims): texts of 16 kB, 50 warnings of 2 kB, an explanation of 48 kB,
# at most 6 bytes a character once JSON-escaped. Parsing holds the GIL of the process the pool
# lives in: a forged 4 MB report of empty lists cost a second of it (with one web process, every
# page waited), so the structure is bounded too: an honest explanation has a few thousand.
MAX_REPORT_BYTES = 1024 * 1024
MAX_REPORT_CONTAINERS = 30_000
# After the run reports or ends: the most time spent draining what is already in the pipes.
DRAIN_S = 0.2
SMALL_READ = 4096
FREE_SMALL_READS = 64
PACE_S = 0.002
"""Past `FREE_SMALL_READS` reads of under `SMALL_READ` bytes (from the report's socket or the
output's pipes), each next read waits `PACE_S` first, so what trickles in is read in larger
pieces: a run writing its report one byte at a time, each after the last was read, woke this
thread 50,000 times a second and cost the server half a core, outside the run's own CPU limit
(an attacker's review). An honest run writes its report at once and its output in few pieces."""
# After the report (or the report channel's end): the least time allowed for the process to end.
EXIT_GRACE_S = 0.5

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


def collect(slot: Slot, code: str, limits: Limits, explain: bool) -> RunResult:
    """Send the code to a prepared runner and gather what happened, within `limits.wall_s`."""
    slot.set_caps(limits)
    if (
        slot.cgroup
    ):  # prepared at a low CPU weight (`PREPARING_CPU_WEIGHT`): the run gets the default
        RunCgroup.from_paths(slot.cgroup).set_running_weight()
    started = time.perf_counter()
    try:
        wire.send(
            slot.sock, {"type": "run", "code": code, "limits": limits.to_dict(), "explain": explain}
        )
    except OSError as exc:
        raise RunnerGone(str(exc)) from exc
    deadline = started + limits.wall_s
    streams = {slot.out_fd: bytearray(), slot.err_fd: bytearray()}
    reader = wire.Reader(max_containers=MAX_REPORT_CONTAINERS, max_bytes=MAX_REPORT_BYTES)
    report: dict[str, Any] | None = None
    channel_closed = False
    ended_by: str | None = None
    report_bytes = 0
    drain_until = deadline
    small_reads = 0
    sel = selectors.DefaultSelector()
    for source in (slot.sock, slot.out_fd, slot.err_fd):
        sel.register(source, selectors.EVENT_READ)
    try:
        while True:
            now = time.perf_counter()
            heard = report is not None or channel_closed
            if not heard and now >= deadline:
                ended_by = "timeout"
                break
            # Once the run has reported (or its channel ended), only drain what is already written.
            stop = min(deadline, drain_until) if heard else deadline
            if now >= stop or not sel.get_map():
                break
            # After the report, poll without waiting: the runner flushed its output before
            # reporting, so returning need not wait for the process to exit.
            if small_reads > FREE_SMALL_READS:
                time.sleep(PACE_S)
            events = sel.select(0 if heard else stop - now)
            if not events and heard:
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
                    small_reads += 0 < len(data) < SMALL_READ
                    if not data or report_bytes > MAX_REPORT_BYTES:
                        sel.unregister(slot.sock)
                        if data:
                            ended_by = "malformed"
                        channel_closed = True
                        drain_until = time.perf_counter() + DRAIN_S
                        continue
                    try:
                        messages = reader.feed(data)
                    except (ValueError, RecursionError):
                        messages, ended_by = [], "malformed"
                    # An honest runner sends one message after the code: its report. Anything
                    # else first is malformed, and nothing after it is read: a flood of small
                    # messages cost the server 1.5 s of CPU for one run when each was parsed.
                    if messages:
                        kind = messages[0].get("type") if isinstance(messages[0], dict) else None
                        if kind in ("result", "crash"):
                            report = messages[0]
                        else:
                            ended_by = "malformed"
                    if ended_by == "malformed":
                        break
                    if report is not None:
                        # Stop listening to the socket: the rest of the run is noise to us.
                        sel.unregister(slot.sock)
                        drain_until = time.perf_counter() + DRAIN_S
                else:
                    fd = key.fd  # the output pipes were registered as file descriptors
                    data = os.read(fd, 65536)
                    if not data:
                        sel.unregister(fd)
                        continue
                    small_reads += len(data) < SMALL_READ
                    streams[fd] += data
                    if len(streams[fd]) > limits.output_bytes:
                        del streams[fd][limits.output_bytes :]
                        ended_by = ended_by or "output_limit"
            if ended_by in ("output_limit", "malformed"):
                break
    finally:
        sel.close()
    ending = None
    if ended_by is None:
        # A report is a claim until the process has ended the way it says: it has until the wall
        # time to do so (a forged report followed by a process that keeps running is never
        # believed). After the channel closed with no report, only how it ended is left to learn.
        grace = time.perf_counter() + EXIT_GRACE_S
        ending = await_ending(slot, max(deadline, grace) if report is not None else grace)
        if ending is None and report is not None:
            ended_by = "timeout"
        elif ending is not None and _drain(slot, streams, limits.output_bytes):
            ended_by = "output_limit"  # what it wrote between its report and its end
    if ended_by or ending is None:
        slot.kill()  # now, before reading status files
    duration_ms = (time.perf_counter() - started) * 1000
    return _result(slot, code, limits, explain, report, ending, ended_by, streams, duration_ms)


def _drain(slot: Slot, streams: dict[int, bytearray], cap: int) -> bool:
    """Read what is already in the output pipes, without waiting; True if past the cap."""
    over = False
    for fd, buf in streams.items():
        while select.select([fd], [], [], 0)[0]:
            data = os.read(fd, 65536)
            if not data:
                break
            buf += data
            if len(buf) > cap:
                del buf[cap:]
                over = True
                break
    return over


def await_ending(slot: Slot, until: float) -> dict[str, Any] | None:
    """How the runner ended: its exit code as soon as the kernel holds it, else the zygote's
    message once it has reaped the runner (signals and CPU time come only from there); None if
    the process has not ended by `until`.

    A runner exits microseconds after it reports, so the first look usually finds it exiting."""
    attempt = 0
    while True:
        status = exit_status_while_exiting(slot.watch)
        if status is not None:
            return {"signal": None, "code": os.WEXITSTATUS(status), "cpu_s": None}
        left = until - time.perf_counter()
        if left <= 0:
            return None
        # Short sleeps, not yields: a sleeping thread gives the runner the CPU to reach its exit,
        # and on waking takes it back at once, where a yielding one can wait out a whole tick.
        wait = min(left, 0.00005 * 2 ** min(attempt, 9))
        attempt += 1
        if slot.status is None:
            time.sleep(wait)
            continue
        if select.select([slot.status], [], [], wait)[0]:
            try:
                msg = wire.recv(slot.status)
            except (OSError, ValueError):
                return None
            if isinstance(msg, dict) and msg.get("type") == "exit":
                return msg
            if msg is None:
                return None


def _ended_in_words(ending: dict[str, Any]) -> str:
    sig = ending.get("signal")
    if sig:
        return f"was ended by {_SIGNAL_WORDS.get(sig, f'signal {sig}')}"
    return f"exited with code {ending.get('code')}"


def _result(
    slot: Slot,
    code: str,
    limits: Limits,
    explain: bool,
    report: dict[str, Any] | None,
    ending: dict[str, Any] | None,
    ended_by: str | None,
    streams: dict[int, bytearray],
    duration_ms: float,
) -> RunResult:
    out = RunResult(status="killed", environment=Environment.from_dict(slot.environment))
    # Escaped, a character the page must not show grows to up to six: the cap holds for the text
    # shown as for the bytes printed (64 KB of them became 390,000 characters, kept and sent).
    out.stdout = shown(streams[slot.out_fd].decode("utf-8", "replace"))[: limits.output_bytes]
    out.stderr = shown(streams[slot.err_fd].decode("utf-8", "replace"))[: limits.output_bytes]
    out.duration_ms = round(duration_ms, 2)
    oom = bool(slot.cgroup) and RunCgroup.from_paths(slot.cgroup or {}).oom_killed()
    info = ending or {}
    sig = info.get("signal") if isinstance(info.get("signal"), int) else None
    exit_code = info.get("code") if isinstance(info.get("code"), int) else None
    reported_cpu_s = info.get("cpu_s")
    cpu_s = reported_cpu_s if isinstance(reported_cpu_s, (int, float)) else 0
    if ended_by == "timeout":
        out.status, out.message = (
            "timeout",
            f"Stopped after the wall-time limit of {limits.wall_s:g} s.",
        )
        if report is not None:
            out.message += " It reported, but its process did not end: the report was set aside."
    elif ended_by == "output_limit":
        out.status = "output_limit"
        out.message = f"Output was cut at {limits.output_bytes} bytes and the run was stopped."
    elif ended_by == "malformed":
        out.message = "The run wrote a malformed report on the sandbox's channel and was stopped."
    elif oom:
        out.status, out.message = (
            "memory",
            f"Killed for using more than {limits.memory_bytes} bytes of memory.",
        )
    elif sig == signal.SIGXCPU or (sig and cpu_s >= limits.cpu_s):
        out.status, out.message = "timeout", f"Stopped at the CPU-time limit of {limits.cpu_s} s."
    elif sig:
        out.message = f"The process {_ended_in_words(info)}."
    elif report is None:
        if exit_code is not None:
            out.message = f"The process exited with code {exit_code} before finishing (os._exit?)."
        else:
            out.message = "The process ended without reporting a result."
    else:
        _believe(out, report, exit_code, code, explain)
    return out


def _believe(
    out: RunResult, report: dict[str, Any], exit_code: int | None, code: str, explain: bool
) -> None:
    """Take the report's claims into `out` if the process ended as the report says it would."""
    try:
        claim = read_claim(report, code, explain)
    except (Malformed, TypeError, ValueError, AttributeError):
        out.message = "The run wrote a malformed report on the sandbox's channel and was stopped."
        return
    expected = CRASH_EXIT if report.get("type") == "crash" else EXIT_CODES[claim.status]
    if exit_code != expected:
        said = claim.status + (f" ({claim.exception.type})" if claim.exception else "")
        out.status = "error"
        out.message = (
            f"The run's report contradicts how its process ended: it claimed {said}, but the process "
            f"exited with code {exit_code}, so the report was set aside."
        )
        return
    out.status = claim.status
    out.message = claim.message
    out.exception = claim.exception
    out.warnings = claim.warnings
    out.explanation = claim.explanation
