"""The test run's one sandbox pool, and the guard that keeps it one.

Starting a pool imports torch in a zygote and prepares runners: seconds each time. Every test that
needs to run code shares the session's pool (the `sandbox_pool` fixture in tests/conftest.py).
A test about the pool's own lifecycle (its zygote dying, a pool that is closed) may start its
own, and says so with `@pytest.mark.own_pool`; any other test that starts a pool fails.
"""

from __future__ import annotations

import os
import threading

import pytest

from sandbox import Sandbox

SECRET_ENV = "AMPQUIZ_TEST_SECRET"
"""A variable in the server's environment that no snippet may read."""

STARTS: list[str] = []
"""Who started each pool in this process: 'shared', or the id of an own_pool test."""

_current: dict[str, pytest.Item | None] = {"item": None}
_lock = threading.Lock()


def watch_pool_starts() -> None:
    """Wraps `Sandbox.start` so every pool started in the test process is counted and checked."""
    original = Sandbox.start
    if getattr(original, "_counted", False):
        return

    def start(self: Sandbox) -> Sandbox:
        if self.zygote is not None:
            return original(self)  # already running: start() is a no-op
        item = _current["item"]
        with _lock:
            if getattr(self, "_shared", False):
                STARTS.append("shared")
            elif item is not None and item.get_closest_marker("own_pool") is not None:
                STARTS.append(item.nodeid)
            else:
                where = item.nodeid if item is not None else "outside any test"
                raise AssertionError(
                    f"{where} starts a sandbox pool of its own: use the `sandbox_pool` fixture, or "
                    "mark a test of the pool's own lifecycle @pytest.mark.own_pool"
                )
        return original(self)

    start._counted = True  # type: ignore[attr-defined]
    Sandbox.start = start  # type: ignore[method-assign]


def set_current_item(item: pytest.Item | None) -> None:
    _current["item"] = item


def shared_pool(hide: list[str]) -> Sandbox:
    """The session's pool (not started): hides `hide` from snippets, like the server's data folder."""
    os.environ[SECRET_ENV] = "hunter2"  # in the server's environment before the pool starts
    pool = Sandbox(workers=2, hide=hide)
    pool._shared = True  # type: ignore[attr-defined]
    return pool


def assert_still_works(sb: Sandbox) -> None:
    """After a hostile run, the next normal run must still succeed."""
    r = sb.run("import torch\nprint(torch.ones(2).sum().item())")
    assert r.status == "ok", r
    assert r.stdout == "2.0\n"
