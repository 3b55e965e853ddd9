from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import Sandbox
from tests.support.web import Web


@pytest.fixture
def web(tmp_path: Path, sandbox_pool: Sandbox) -> Web:
    """The real app on a fresh SQLite file in `tmp_path`, with the test bank and the session's pool."""
    return Web(tmp_path, sandbox_pool)
