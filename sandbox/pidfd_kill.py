"""Killing the processes of an emptied cgroup by their pids, and never a process that was handed
one of those numbers after it was read.

Runs in: the server (`sandbox.cgroup.RunCgroup.kill_all`, when a run's cgroup is removed after
its run).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable


def kill_members(pids: set[int], members: Callable[[], set[int]]) -> None:
    """SIGKILL each of `pids` still a member once a pidfd holds it: a pid read from cgroup.procs
    may have ended, been reaped and been handed to another process by the time of the kill (a
    busy host reuses pids within seconds). A pidfd keeps its number from being reused, so a pid
    still listed after it is opened is the member. By number where there are no pidfds."""
    if not hasattr(os, "pidfd_open"):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return
    handles = {}
    try:
        for pid in pids:
            try:
                handles[pid] = os.pidfd_open(pid)
            except OSError:
                pass  # gone already
        still = members()
        for pid, handle in handles.items():
            if pid in still:
                try:
                    signal.pidfd_send_signal(handle, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        for handle in handles.values():
            os.close(handle)
