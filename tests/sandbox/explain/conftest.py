"""The explanation tests run their snippets through the session's one pool."""

from __future__ import annotations

import functools

import pytest

from sandbox import Sandbox
from tests.support.explain import Explain, explain_in


@pytest.fixture
def explain(sandbox_pool: Sandbox) -> Explain:
    """`explain(code) -> (stdout, report)`: the snippet run with explain=True in the shared pool."""
    return functools.partial(explain_in, sandbox_pool)
