"""How fast answers are taken: per learner (cookie) and per client address, a token bucket each.

Every answer is a row kept for good and counted in the item statistics instructors read. Without a
bound, one client posting answers in a loop grows the database by gigabytes an hour and, by
throwing its cookie away each time (a new learner per answer), fills "Most missed" with whatever
it likes. A person answers a question in seconds; a bucket of `per_minute` answers, refilled at
that rate, never stops one, and a class behind one address (a school's NAT) shares the address's
larger bucket. Past either, the answer is refused with 429 and when to send it again; the page
keeps what was typed or picked.

Runs in: each web process, on its event loop (no lock): with `serve --processes N` a client can
reach N times the rate, as it can N times the connections.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable

from app.web.errors import AppError

BUCKETS_KEPT = 100_000
"""Buckets remembered at once; beyond, the full ones (nothing owed) are forgotten first."""


class TooManyAnswers(AppError):
    status = 429

    def __init__(self, retry_after_s: int, whose: str) -> None:
        said = (
            f"You have sent more answers in the last minute than one learner may: wait {retry_after_s} s, then send your answer again."
            if whose == "learner"
            else f"Your network has sent more answers in the last minute than a class does: wait {retry_after_s} s, "
            "then send your answer again."
        )
        super().__init__(said, headers={"Retry-After": str(retry_after_s)})
        self.retry_after_s = retry_after_s


class AnswerRate:
    """`take(learner, address)` before grading an answer: raises TooManyAnswers past a bucket.
    A limit of 0 turns that bucket off (a benchmark's learners answer with no pause at all)."""

    def __init__(
        self, per_learner: int, per_address: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = {"learner": per_learner, "address": per_address}
        self.clock = clock
        self.buckets: dict[tuple[str, str], tuple[float, float]] = {}
        """(whose, key) -> (tokens left, when counted)."""

    def take(self, learner: str, address: str) -> None:
        now = self.clock()
        wanted = [
            (("learner", learner), self.limits["learner"]),
            (("address", address), self.limits["address"]),
        ]
        left = {}
        for key, per_minute in wanted:
            if per_minute <= 0:
                continue
            tokens, then = self.buckets.get(key, (per_minute, now))
            tokens = min(per_minute, tokens + (now - then) * per_minute / 60)
            if tokens < 1:
                raise TooManyAnswers(max(1, math.ceil((1 - tokens) * 60 / per_minute)), key[0])
            left[key] = tokens
        for key, tokens in left.items():  # only once both allow it: a refusal costs nothing
            self.buckets[key] = (tokens - 1, now)
        if len(self.buckets) > BUCKETS_KEPT:
            self._forget(now)

    def give_back(self, learner: str, address: str) -> None:
        """Undoes a `take` (the answer was one already stored)."""
        for key in (("learner", learner), ("address", address)):
            if key in self.buckets:
                tokens, then = self.buckets[key]
                self.buckets[key] = (min(self.limits[key[0]], tokens + 1), then)

    def _forget(self, now: float) -> None:
        """Drop the buckets that have refilled (the same as never seen); then, if still too many,
        the oldest half."""
        full = [key for key, (tokens, then) in self.buckets.items()
                if tokens + (now - then) * self.limits[key[0]] / 60 >= self.limits[key[0]]]  # fmt: skip
        for key in full:
            del self.buckets[key]
        if len(self.buckets) > BUCKETS_KEPT:
            for key in list(self.buckets)[: len(self.buckets) // 2]:
                del self.buckets[key]


def address_key(host: str) -> str:
    """Whose share an address is: itself, or for IPv6 its /64 (a client is given a whole /64 and
    may use any address in it, a fresh share each)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
