"""Looking at the host's processes from outside the sandbox: what a run may have left behind."""

from __future__ import annotations

import time
from pathlib import Path


def eventually_empty(probe, seconds: float = 10.0) -> list:
    """Clean-up runs off the learner's clock, in the background: allow it a moment."""
    deadline = time.monotonic() + seconds
    while (found := probe()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def processes_of_run_uids() -> list[int]:
    """Host pids still running as a sandbox run's uid (200000 and up)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid_line = next(l for l in (entry / "status").read_text().splitlines() if l.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if int(uid_line.split()[1]) >= 200000:
                found.append(int(entry.name))
    return found
