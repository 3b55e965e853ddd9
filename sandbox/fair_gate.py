"""`FairGate`: how the pool admits runs to its workers, first come, first served.

Runs in: the server (the pool's callers' threads).
"""

from __future__ import annotations

import collections
import threading


class FairGate:
    """At most `n` holders, admitted in arrival order (a Semaphore lets a late caller barge in)."""

    def __init__(self, n: int) -> None:
        self._n = self._free = n
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

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._free == self._n, timeout)
