"""One mapping from a run that could not start to what its user is told (`run_refusal`): a full
queue is a 429 saying when to come back, a sandbox down a 503, logged where the caller says what
it was doing; anything else a run raises is not a refusal at all."""

from __future__ import annotations

import logging

import pytest

from app.runs.queue import QueueFull
from app.web.errors import RUN_REFUSED, SandboxDown, TooManyRuns, run_refusal
from sandbox import SandboxError


def test_a_full_queue_is_a_429_with_when_to_come_back() -> None:
    said = run_refusal(QueueFull(7, "learner", 2))
    assert (
        isinstance(said, TooManyRuns)
        and said.status == 429
        and said.headers == {"Retry-After": "7"}
    )
    assert said.message == "You already have 2 runs going; wait for one to finish (about 7 s)."


def test_a_sandbox_down_is_a_503_logged_only_with_what_was_being_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="ampquiz.web"):
        quiet = run_refusal(SandboxError("zygote died"))
        assert caplog.records == []
        logged = run_refusal(SandboxError("zygote died"), doing="running q-1")
    assert (
        isinstance(quiet, SandboxDown) and isinstance(logged, SandboxDown) and logged.status == 503
    )
    assert [r.getMessage() for r in caplog.records] == ["sandbox failure running q-1: zygote died"]


def test_only_those_are_refusals() -> None:
    assert issubclass(QueueFull, RUN_REFUSED) and issubclass(SandboxError, RUN_REFUSED)
    assert not issubclass(RuntimeError, RUN_REFUSED) and not issubclass(TimeoutError, RUN_REFUSED)
