from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import make_url

from sandbox import Sandbox
from tests.support.postgres import POSTGRES_SERVER, as_admin
from tests.support.web import Web


@pytest.fixture
def web(tmp_path: Path, sandbox_pool: Sandbox) -> Web:
    """The real app on a fresh SQLite file in `tmp_path`, with the test bank and the session's pool."""
    return Web(tmp_path, sandbox_pool)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database of its own (in a time zone other than UTC), dropped after the test."""
    name = f"ampquiz_test_{uuid.uuid4().hex[:12]}"
    as_admin(
        f'CREATE DATABASE "{name}"', f"ALTER DATABASE \"{name}\" SET timezone TO 'America/New_York'"
    )
    try:
        yield make_url(POSTGRES_SERVER).set(database=name).render_as_string(hide_password=False)
    finally:
        as_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
