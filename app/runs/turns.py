"""Who may run a snippet, and who runs next: the one owner of that rule.

Learners' own runs (the playground, the API) are admitted within `workers + queue` at once, and
each learner (cookie) and client address within its share, so one client cannot fill the queue
for everyone; question runs and background runs are not counted against that room. A free worker
goes to the waiting run with the highest priority (`PRIORITY`); within it, to the run whose
owners have the fewest runs on workers now (an address's before a learner's), then first come,
first served: a client that queued eight long runs no longer makes a newcomer wait for all of them.

`Turns` only counts and chooses; how a waiting run is woken is its caller's: `RunQueue` (one web
process's runs, on its event loop, a future each) and the pool host of `serve --processes N`
(every web process's runs, on their connection threads under a lock, an event each). Not
thread-safe by itself.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Callable
from typing import Generic, Literal, TypeVar

Lane = Literal["question", "learner", "background"]
PRIORITY: dict[str, int] = {"question": 0, "learner": 1, "background": 2}
"""Who gets the next free worker: the run shown with an answered question first (it is shared by
every learner who answers it, and never waits behind playground runs), then learners' own runs,
then proving keys in the background."""

Waiter = TypeVar("Waiter")


class QueueFull(Exception):
    """No room for this run: every worker is busy and the queue is full (`reason="queue"`), or
    this learner or address already has its share of runs going (`"learner"`, `"address"`)."""

    def __init__(self, retry_after_s: int, reason: str = "queue", limit: int = 0) -> None:
        super().__init__(f"no room for the run ({reason}); {retry_after_s} s is a fair wait")
        self.retry_after_s = retry_after_s
        self.reason = reason
        self.limit = limit


def retry_after_s(in_flight: int, capacity: int, workers: int, mean_run_s: float) -> int:
    """Whole seconds until a retry finds room: the runs that must end first (one, when the queue
    is just full), ending at the measured rate of `workers / mean_run_s` runs a second (the mean
    time a run holds its worker); at least 1 s."""
    must_end = max(1, in_flight - capacity + 1)
    return max(1, math.ceil(must_end * mean_run_s / workers))


class Turns(Generic[Waiter]):
    """The counts and the choice (see above). A run goes `admit` -> `take_slot` (or waits until
    `give_back_slot` hands it one) -> `started` -> `give_back_slot` -> `finished`."""

    def __init__(
        self, *, workers: int, queue: int, per_learner: int = 2, per_address: int = 8
    ) -> None:
        self.workers = workers
        self.queue = queue
        self.caps = {"learner": per_learner, "address": per_address}
        self.in_flight = 0
        """Admitted runs of every lane, running or waiting."""
        self._learners_in_flight = 0
        self._by_owner: collections.Counter[str] = collections.Counter()
        self._free = workers
        self._waiting: list[tuple[int, int, tuple[str, ...], Waiter]] = []
        """(priority, arrival, owners, waiter) of each run waiting for a worker: a few dozen at most."""
        self._running: collections.Counter[str] = collections.Counter()
        """Owner -> runs of theirs on a worker now."""
        self._arrivals = itertools.count()
        self.mean_s = 0.05
        self._measured = False
        """Moving average of how long a run holds its worker (not counting its wait in the
        queue: with that in, a full queue would inflate its own estimate), for Retry-After."""

    @property
    def spare(self) -> bool:
        """A background run may start without a learner ever waiting for it: another worker
        stays free (with one worker: it is idle)."""
        return self.in_flight <= max(0, self.workers - 2)

    def retry_after_s(self) -> int:
        return retry_after_s(
            self._learners_in_flight, self.workers + self.queue, self.workers, self.mean_s
        )

    def admit(self, lane: str, owners: tuple[str, ...]) -> None:
        """Counts the run in, or raises QueueFull (a learner's run only) when there is no room."""
        if lane == "learner":
            if self._learners_in_flight >= self.workers + self.queue:
                raise QueueFull(self.retry_after_s())
            for owner in owners:
                kind = owner.split(":", 1)[0]
                cap = self.caps.get(kind)
                if cap is not None and self._by_owner[owner] >= cap:
                    raise QueueFull(max(1, math.ceil(self.mean_s)), kind, cap)
        self.in_flight += 1
        self._learners_in_flight += lane == "learner"
        self._by_owner.update(owners)

    def take_slot(self, lane: str, owners: tuple[str, ...], waiter: Waiter) -> bool:
        """A worker now (True), or `waiter` waits in line for `give_back_slot` to hand it one."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return True
        self._waiting.append((PRIORITY[lane], next(self._arrivals), owners, waiter))
        return False

    def started(self, owners: tuple[str, ...]) -> None:
        self._running.update(owners)

    def give_back_slot(
        self, owners: tuple[str, ...], gave_up: Callable[[Waiter], bool]
    ) -> Waiter | None:
        """A run (of `owners`, if it started) is off its worker: the waiter the worker goes to
        next, or None (it is free). Waiters that `gave_up` are dropped."""
        self._running.subtract(owners)
        self._running += collections.Counter()  # drop owners with nothing running
        self._waiting = [entry for entry in self._waiting if not gave_up(entry[3])]
        if not self._waiting:
            self._free += 1
            return None
        chosen = min(self._waiting, key=lambda e: (e[0], *self._share(e[2]), e[1]))
        self._waiting.remove(chosen)
        return chosen[3]

    def finished(self, lane: str, owners: tuple[str, ...], held_s: float) -> None:
        """Counted out once the sandbox is done with it (not when its client gave up: a run
        abandoned by its client still held its place); `held_s`: how long it held its worker."""
        self.in_flight -= 1
        self._learners_in_flight -= lane == "learner"
        self._by_owner.subtract(owners)
        self._by_owner += collections.Counter()  # drop owners with nothing left
        if lane != "background" and held_s:
            self.mean_s = 0.8 * self.mean_s + 0.2 * held_s if self._measured else held_s
            self._measured = True

    def _share(self, owners: tuple[str, ...]) -> tuple[int, int]:
        """How many runs this run's address, then its learner, have on workers now."""
        by_kind = {owner.split(":", 1)[0]: self._running[owner] for owner in owners}
        return by_kind.get("address", 0), by_kind.get("learner", 0)
