"""The run queue's Retry-After arithmetic (milliseconds; the queue itself is tested through the web)."""

from __future__ import annotations

import pytest

from app.runs.queue import retry_after_s


@pytest.mark.parametrize(
    ("in_flight", "capacity", "workers", "mean_run_s", "expected"),
    [
        (18, 18, 2, 0.05, 1),  # short runs: never less than a second
        (18, 18, 2, 3.0, 2),  # one run must end; two workers end one every 1.5 s
        (18, 18, 2, 20.0, 10),
        (20, 18, 2, 3.0, 5),  # three must end (more in flight than room: the server shrank)
        (4, 4, 4, 3.0, 1),  # four workers: one ends every 0.75 s
    ],
)
def test_retry_after_is_when_a_retry_finds_room(
    in_flight: int, capacity: int, workers: int, mean_run_s: float, expected: int
) -> None:
    assert retry_after_s(in_flight, capacity, workers, mean_run_s) == expected


def test_a_longer_backlog_never_asks_for_a_shorter_wait() -> None:
    waits = [retry_after_s(n, 18, 2, 0.7) for n in range(40)]
    assert waits == sorted(waits)
