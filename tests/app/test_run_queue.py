"""The run queue's Retry-After arithmetic (milliseconds; the queue itself is tested through the web)."""

from __future__ import annotations

import pytest

from app.run_queue import retry_after_s


@pytest.mark.parametrize(
    ("in_flight", "workers", "mean_run_s", "expected"),
    [
        (2, 2, 0.05, 1),  # short runs: never less than a second
        (18, 2, 0.05, 1),
        (18, 2, 1.0, 9),  # 17 runs ahead of a newcomer, two at a time, a second each
        (18, 2, 10.0, 85),
        (4, 4, 3.0, 1),  # one run ahead, four workers: ceil(3 / 4)
    ],
)
def test_retry_after_is_the_backlog_spread_over_the_workers(
    in_flight: int, workers: int, mean_run_s: float, expected: int
) -> None:
    assert retry_after_s(in_flight, workers, mean_run_s) == expected


def test_a_longer_backlog_never_asks_for_a_shorter_wait() -> None:
    waits = [retry_after_s(n, 2, 0.7) for n in range(40)]
    assert waits == sorted(waits)
