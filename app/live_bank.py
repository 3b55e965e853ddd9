"""The bank as the server serves it: the questions and their verification records, reloaded when a
file under the bank folder changes (checked every few seconds).

Authors edit YAML while the server runs; a file with problems is left out (and logged) while the
valid ones keep serving. No web framework here.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from app.bank.load import Bank, load_bank, question_files
from app.verify.record import Record, load_records, records_dir

log = logging.getLogger("ampquiz.bank")


class LiveBank:
    """The current bank and records; `current()` reloads them when their files changed."""

    def __init__(self, root: Path, *, check_every_s: float = 2.0) -> None:
        self.root = Path(root)
        self.check_every_s = check_every_s
        self._lock = threading.Lock()
        self._checked = 0.0
        self._signature: tuple = ()
        self.bank = Bank()
        self.records: list[Record] = []
        self.reload()

    def _files(self) -> list[Path]:
        files = question_files(self.root) if self.root.exists() else []
        folder = records_dir(self.root)
        return files + (sorted(folder.glob("*.json")) if folder.is_dir() else [])

    def _current_signature(self) -> tuple:
        sig = []
        for path in self._files():
            try:
                st = path.stat()
            except OSError:
                continue
            sig.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def reload(self) -> None:
        signature = self._current_signature()
        # Whatever served an id until now keeps it: a new file reusing the id is the one left out.
        served = {q.id: q.path for q in self.bank.questions}
        bank = load_bank(self.root, incumbents=served)
        for problem in sorted(bank.problems):
            log.warning("question bank: left out: %s", problem)
        log.info("question bank: %d questions in %d sets", len(bank.questions), len(bank.sets))
        self.bank, self.records, self._signature = bank, load_records(self.root), signature
        self._checked = time.monotonic()

    def current(self) -> Bank:
        if time.monotonic() - self._checked >= self.check_every_s:
            with self._lock:
                if time.monotonic() - self._checked >= self.check_every_s:
                    self._checked = time.monotonic()
                    if self._current_signature() != self._signature:
                        self.reload()
        return self.bank
