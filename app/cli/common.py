"""What several commands share: the default bank folder, and loading a bank that must be clean."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.bank.load import Bank
    from app.settings import Settings

DEFAULT_BANK = Path("questions")


def load_clean_bank(path: Path) -> Bank | None:
    """The bank, or None after printing its problems: commands that run questions need all of it."""
    from app.bank.load import load_bank

    bank = load_bank(path)
    if not bank.problems:
        return bank
    for problem in sorted(bank.problems):
        print(problem, file=sys.stderr)
    print(
        f"{len(bank.problems)} errors in the bank: fix them first (ampquiz lint)", file=sys.stderr
    )
    return None


def remote_settings(command: str, **overrides: object) -> Settings | None:
    """The settings of a command that talks to remote workers (`AMPQUIZ_*`, then flags), or None
    after saying what is wrong: a malformed setting, or no NATS server named."""
    from app.settings import Settings, SettingsError

    try:
        settings = Settings.from_env(None, **overrides)  # the environment, then the flags
    except SettingsError as exc:
        print(f"ampquiz {command}: {exc}", file=sys.stderr)
        return None
    if not settings.workers_url.startswith(("nats://", "tls://")):
        print(f"ampquiz {command}: set AMPQUIZ_WORKERS_URL (or --url) to the workers' NATS server, "
              "e.g. nats://127.0.0.1:4222", file=sys.stderr)  # fmt: skip
        return None
    return settings
