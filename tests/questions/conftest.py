from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BANK = REPO / "questions"
SEEDS = REPO.parent / "shared" / "seeds"


def ampquiz(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The real command line, as an author types it."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600, check=False
    )
