"""The bank as the server serves it: the questions and their verification records, reloaded when a
file under the bank folder changes (checked every few seconds).

Authors edit YAML while the server runs; a file with problems is left out (and logged) while the
valid ones keep serving. No file stops a reload (`load_bank` never raises), and should anything
else fail in one, the bank read before stays served and the next change is read again. Once `start()`ed, a thread of its own watches the files, re-reads only
those that changed, and swaps the new bank in with one assignment: a request never waits for a
reload (at 5,000 questions a full reload took seconds on the event loop). No web framework here.

`ampquiz serve --processes N` reads the files once for all its processes (`preload`, before they
are forked): each starts from what was read, and reads again only the files changed since.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from app.bank.index import index_of
from app.bank.load import Bank, FileCache, load_bank, question_files
from app.verify.record import Record, load_records, records_dir

log = logging.getLogger("ampquiz.bank")


def files_signature(paths: Iterable[Path]) -> tuple:
    """What tells a watcher that files changed: each one's path, modification time and size."""
    sig = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        sig.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(sig)


_PRELOADED: dict[Path, FileCache] = {}
"""What `preload` read, by bank folder."""


def preload(root: Path | str) -> None:
    """Reads the bank's files in this process, for the processes it forks next (`serve --processes
    N`'s web processes, `app.web.server.preload`): each `LiveBank` of that folder starts from what was read,
    shared with its siblings until one writes it, and reads again only the files changed since.
    Each would otherwise parse the whole bank itself (about half a second of CPU at 5,000 questions)."""
    collecting = gc.isenabled()
    gc.disable()  # as in `LiveBank.reload`: nothing cyclic to find among a whole bank's new objects
    try:
        cache: FileCache = {}
        load_bank(root, cache=cache)
        _PRELOADED[Path(root)] = cache
    finally:
        if collecting:
            gc.enable()


class LiveBank:
    """The current bank and records; `current()` reloads them when their files changed."""

    def __init__(self, root: Path, *, check_every_s: float = 2.0) -> None:
        self.root = Path(root)
        self.check_every_s = check_every_s
        self._lock = threading.RLock()
        self._checked = 0.0
        self._signature: tuple = ()
        self._records_signature: tuple | None = None
        self.bank = Bank()
        self.records: list[Record] = []
        self._cache: FileCache = dict(_PRELOADED.get(self.root, {}))  # see `preload`
        self.prepare: list[Callable[[Bank, list[Record]], object]] = []
        """Work to do on a new bank before it is served (in the reloading thread, so no request
        pays for it): the server warms what it caches per bank version here."""
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.reload()

    def _record_files(self) -> list[Path]:
        folder = records_dir(self.root)
        return sorted(folder.glob("*.json")) if folder.is_dir() else []

    def _files(self) -> list[Path]:
        files = question_files(self.root) if self.root.exists() else []
        return files + self._record_files()

    def _current_signature(self) -> tuple:
        try:
            return files_signature(self._files())
        except OSError:  # the folder itself gone or unreadable a moment: nothing to compare
            return ()

    def reload(self) -> None:
        # No cyclic garbage collection while a bank is built: a full collection would walk every
        # new object while holding the GIL (tens of milliseconds at 5,000 questions, a stall for
        # every request meanwhile); what the old bank leaves is freed by refcounting, and the new
        # one is frozen out of the collector's way once it is served.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._reload()
        finally:
            if collecting:
                gc.enable()
        # The bank lives as long as the server: out of the collector's way, so full collections
        # during requests do not walk it.
        gc.freeze()

    def _reload(self) -> None:
        with self._lock:
            signature = self._current_signature()
            try:
                bank, records, records_signature = self._read(signature)
            except (
                Exception
            ):  # a fault of ours (each file's own are problems): the bank served stays
                log.exception("question bank: reload failed; still serving the bank read before")
                self._signature, self._checked = (
                    signature,
                    time.monotonic(),
                )  # again at the next change
                return
            self.bank, self.records, self._signature = bank, records, signature
            self._records_signature = records_signature
            self._checked = time.monotonic()

    def _read(self, signature: tuple) -> tuple[Bank, list[Record], tuple]:
        """The bank and records as the files are now, ready to serve. `load_bank` never raises:
        whatever one file holds is a problem that leaves it out (`app.bank.load`)."""
        # Whatever served an id until now keeps it: a new file reusing the id is the one left out.
        served = {q.id: q.path for q in self.bank.questions}
        bank = load_bank(self.root, incumbents=served, cache=self._cache)
        for problem in sorted(bank.problems):
            log.warning("question bank: left out: %s", problem)
        log.info("question bank: %d questions in %d sets", len(bank.questions), len(bank.sets))
        # The records change far less often than the questions: read again only when their files
        # did. Reading them is one long JSON parse holding the GIL, and a new records object
        # makes every question's proof be worked out again (kept per records object).
        records_signature = files_signature(self._record_files())
        records = self.records
        if records_signature != self._records_signature:
            try:
                records = load_records(self.root)
            except Exception:  # a record file that is no record: the records read before stay
                log.exception("question bank: reading the verification records failed")
        index_of(bank)  # what pages look up in it, made here rather than by the first request
        for hook in self.prepare:
            try:
                hook(bank, records)
            except Exception:  # warming a cache must not keep a new bank from being served
                log.exception("question bank: preparing the new bank failed")
        return bank, records, records_signature

    def start(self) -> None:
        """Watch the files in a thread of its own from now on (the server does; the CLI need not)."""
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="bank-watcher", daemon=True)
            self._watcher.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(max(self.check_every_s, 0.05)):
            try:
                if self._current_signature() != self._signature:
                    self.reload()
            except Exception:  # a watcher that dies would freeze the bank: log, keep watching
                log.exception("question bank: reload failed")

    def current(self) -> Bank:
        if self._watcher is not None:
            return self.bank  # the watcher keeps it fresh
        if time.monotonic() - self._checked >= self.check_every_s:
            self._checked = time.monotonic()
            if self._current_signature() != self._signature:
                self.reload()
        return self.bank
