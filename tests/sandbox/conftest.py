from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import Sandbox
from tests.sandbox.explain_support import use_pool

SECRET_ENV = "AMPQUIZ_TEST_SECRET"


@pytest.fixture(scope="session")
def secret_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stands for the server's data folder: a database file and a config with a secret."""
    d = tmp_path_factory.mktemp("server-data")
    (d / "ampquiz.db").write_text("learner attempts")
    (d / "config.env").write_text("AMPQUIZ_SECRET_KEY=hunter2")
    return d


@pytest.fixture(scope="session")
def sb(secret_dir: Path):
    os.environ[SECRET_ENV] = "hunter2"  # in the server's environment before the pool starts
    with Sandbox(workers=2, hide=[str(secret_dir)]) as pool:
        use_pool(pool)
        yield pool


def assert_still_works(sb: Sandbox) -> None:
    """After a hostile run, the next normal run must still succeed."""
    r = sb.run("import torch\nprint(torch.ones(2).sum().item())")
    assert r.status == "ok", r
    assert r.stdout == "2.0\n"
