from __future__ import annotations

from pathlib import Path

import pytest

from app.bank.load import Bank, load_bank
from tests.app.export import tricky
from tests.support.cli import BANK


@pytest.fixture
def bank(tmp_path: Path) -> Bank:
    """The tricky test bank (`tricky.py`), two sets, five questions."""
    return tricky.load(tmp_path / "bank")


@pytest.fixture(scope="session")
def real_bank() -> Bank:
    """`questions/` as it is now, whatever it holds (files with problems are left out)."""
    loaded = load_bank(BANK)
    assert loaded.questions, "the real bank loaded no question"
    return loaded
