"""What a studio save names besides its text: the version of the file it replaces."""

from __future__ import annotations

from pathlib import Path

from app.bank.workspace import version_of


def version(path: Path) -> str:
    """The version of the file at `path` as the studio's editor opens it ("" where there is none
    yet): what a save of it must send (`app.bank.workspace`, compare-and-swap)."""
    return version_of(path.read_bytes()) if path.exists() else ""
