"""Session-wide fixtures: one sandbox pool for the whole test run (see tests/support/pool.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Sandbox
from tests.support import pool as pool_support
from tests.support import tiers


def pytest_configure(config: pytest.Config) -> None:
    pool_support.watch_pool_starts()
    tiers.watch_python_starts()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks `slow` what `make test-quick` leaves out (see tests/support/tiers.py)."""
    tiers.mark_slow(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    pool_support.set_current_item(item)
    tiers.set_current_item(item)
    try:
        return (yield)
    finally:
        pool_support.set_current_item(None)
        tiers.set_current_item(None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    starts = pool_support.STARTS
    if starts:
        own = [s for s in starts if s != "shared"]
        terminalreporter.write_line(
            f"sandbox pools started in the test process: {len(starts)} "
            f"({starts.count('shared')} shared, {len(own)} by own_pool tests"
            + (f": {', '.join(own)})" if own else ")")
        )


@pytest.fixture(scope="session")
def secret_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stands for the server's data folder: a database file and a config with a secret."""
    d = tmp_path_factory.mktemp("server-data")
    (d / "ampquiz.db").write_text("learner attempts")
    (d / "config.env").write_text("AMPQUIZ_SECRET_KEY=hunter2")
    return d


@pytest.fixture(scope="session")
def sandbox_pool(secret_dir: Path) -> Iterator[Sandbox]:
    """The one pool every test that runs code shares."""
    with pool_support.shared_pool(hide=[str(secret_dir)]) as pool:
        yield pool
