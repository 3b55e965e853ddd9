"""The sandbox tests run their snippets through the session's one pool (tests/conftest.py)."""

from __future__ import annotations

import pytest

from sandbox import Sandbox


@pytest.fixture(scope="session")
def sb(sandbox_pool: Sandbox) -> Sandbox:
    """The shared pool, under the short name these tests use."""
    return sandbox_pool
