"""Looking at the host's processes from outside the sandbox: what a run may have left behind.

A prepared runner drops to its run's uid while it waits for code, so a live pool always has a few
processes of run uids: its runners, each pid 1 of its own pid namespace. What a finished run may
leave behind is anything else: `processes_of_runs(zygote, runners=False)`. Another pool on the
host (a second test run, say) is told apart by the cgroup its runners made, which names its zygote
(`ampquiz-run-<zygote pid>-...`).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

RUN_UID_BASE = 200000


def eventually_empty(probe, seconds: float = 10.0) -> list:
    """Clean-up runs off the learner's clock, in the background: allow it a moment."""
    deadline = time.monotonic() + seconds
    while (found := probe()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _status(entry: Path) -> dict[str, str]:
    lines = (entry / "status").read_text().splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line)


def processes_of_runs(zygote: int | None = None, *, runners: bool = True) -> list[int]:
    """Host pids running as a sandbox run's uid (200000 and up); of one pool's zygote only when
    `zygote` is given; without the runners themselves (pid 1 of their namespace) when `runners`
    is False."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = _status(entry)
            if int(status["Uid"].split()[0]) < RUN_UID_BASE:
                continue
            if (
                zygote is not None
                and f"/ampquiz-run-{zygote}-" not in (entry / "cgroup").read_text()
            ):
                continue
            if not runners and status.get("NSpid", "").split()[-1:] == ["1"]:
                continue
        except (OSError, KeyError, ValueError, IndexError):
            continue
        found.append(int(entry.name))
    return found


def processes_of_run_uids() -> list[int]:
    """Host pids running as a sandbox run's uid, any pool's, prepared runners included."""
    return processes_of_runs()


def processes_with_argument(marker: str) -> list[int]:
    """Host pids whose command line has `marker` (a snippet's `sleep 987654`, say)."""
    return _processes_whose("cmdline", lambda fields: marker.encode() in fields)


def processes_with_environment(marker: str) -> list[int]:
    """Host pids with `marker` in their environment (a test's own folder, say: what a server it
    started left running, its children included)."""
    return _processes_whose("environ", lambda fields: any(marker.encode() in f for f in fields))


def _processes_whose(part: str, check) -> list[int]:  # type: ignore[no-untyped-def]
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and check((entry / part).read_bytes().split(b"\0")):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def cmdline(pid: int) -> str:
    """What process `pid` runs ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def children(pid: int, running: str = "") -> list[int]:
    """`pid`'s child processes; with `running`, those whose command line has it."""
    out = subprocess.run(["pgrep", "-P", str(pid)], check=False, capture_output=True, text=True)
    return [child for child in map(int, out.stdout.split()) if running in cmdline(child)]


def web_processes(serve: int) -> list[int]:
    """The web processes of `serve --processes N` (pid `serve`): those its `app.web.server.preload`
    child forked."""
    return [pid for parent in children(serve, "app.web.server.preload") for pid in children(parent)]
