"""The bank as a writable folder: what the studio may read and write there, and how.

- File names: a set's file is lowercase words joined by '-', ending in .yaml (`FILE_NAME`,
  matched whole): no folder in it, so every name stays inside the bank's folder
  (`Workspace.path`), its stem is a set id no other file has, and an existing file is one the
  loader reads (`question_files`).
- Reading: as the loader reads (`read_set_file`): a folder, a link, a pipe, a file too large or not
  UTF-8 named like a set file is refused in words (`WorkspaceError`), never raised as an OSError.
- What the bank would take: a file's text read by the loader, plus an id used twice in it or
  already served by another file (either leaves the file out whole, as `ampquiz lint` says).
- Drafts: a file learners are not served (a new set, one left out already) that the loader itself
  refuses is saved as it is, a draft, out of the bank until its author finishes it. A file
  learners are served is never saved with problems (they would lose its questions), nor one that
  loads but takes another file's ids (on the next start it would contend for them).
- Saving is compare-and-swap (`Workspace.save`): a save names the version of the file its author
  opened (`Opened.version`, a hash of its bytes; "" for a file not there yet), and a file saved
  since is a `Conflict` (409) that carries what is there now. The compare and the write are one
  step under a lock on the bank's folder (`flock` on the folder itself: threads and processes
  alike, and no lock file left in the bank), so of two saves on one version exactly one wins.
- Saving is atomic (a temporary file renamed over the old one): the live bank's reload never
  reads half a file.

No web framework: the studio's routes call this, and say its errors (`WorkspaceError`) as they are.
Editing the text itself, keeping comments and order, is `app.bank.edit`'s.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.bank import edit
from app.bank.files import (
    FILE_NAME,
    MAX_FILE_BYTES,
    Gone,
    Unreadable,
    decode_set_file,
    read_set_bytes,
)
from app.bank.load import (
    Bank,
    LoadedSet,
    duplicate_ids,
    ids_taken_elsewhere,
    load_text,
    question_files,
)
from app.bank.problem import Problem

__all__ = ["FILE_NAME", "SET_FILE_BYTES", "Checked", "Conflict", "NoSuchFile", "Opened", "Workspace",
           "WorkspaceError", "version_of", "write_atomically"]  # fmt: skip

SET_FILE_BYTES = MAX_FILE_BYTES
"""The largest question-set file the studio reads or writes: the loader's own limit."""


class WorkspaceError(ValueError):
    """What the bank's folder refuses; the message is a sentence for the author."""


class NoSuchFile(WorkspaceError, LookupError):
    """A name the bank has no file for."""


class Conflict(WorkspaceError):
    """A save on a version of the file that is no longer there: another save came first.
    `current` is the file's text now (None: it was removed), `version` its version."""

    status = 409
    """What the studio answers it with (HTTP's Conflict)."""

    def __init__(self, name: str, current: str | None, version: str) -> None:
        said = "was removed" if current is None else "was saved"
        super().__init__(f"{name} {said} since you opened it (by another author, tab or process): nothing was "
                         "saved. Their changes are below: merge them into your text, or take theirs, then save again.")  # fmt: skip
        self.name = name
        self.current = current
        self.version = version

    def diff(self, opened: str) -> str:
        """The other save's changes against what this author opened, as a unified diff."""
        return "".join(
            difflib.unified_diff(
                _lines(opened), _lines(self.current or ""),
                f"{self.name} (as you opened it)", f"{self.name} (as saved since)",
            )
        )  # fmt: skip


def _lines(text: str) -> list[str]:
    """A text's lines, each ending in a newline (a last one without ran into the next diff line)."""
    return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]


def version_of(data: bytes | None) -> str:
    """A file's version: a hash of its bytes; "" for a file that is not there."""
    return "" if data is None else hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Opened:
    """A set file as its author opens it: its text, and the version a save must name."""

    text: str
    version: str


@dataclass(frozen=True)
class Checked:
    """A set file's text as the bank would take it, before it is saved (`Workspace.check`)."""

    path: Path
    text: str
    loaded: LoadedSet | None
    """The set, when the bank would serve it as it is; None when it has problems."""
    problems: list[Problem]
    served: bool
    """Learners are served the file as it is now."""
    loads_alone: bool
    """The loader itself takes the text (its problems, if any, are ids used twice or elsewhere)."""

    @property
    def refusal(self) -> str | None:
        """Why the text cannot be saved: it has problems, and learners are served the file (they
        would lose its questions) or it is no draft (it loads, but takes ids it must not)."""
        if self.loaded is not None or not (self.served or self.loads_alone):
            return None
        why = (
            " (learners are served this file, and would lose its questions)" if self.served else ""
        )
        return f"The file does not lint; nothing was saved{why}."

    @property
    def draft(self) -> bool:
        """Saved with its problems, out of the bank until they are fixed."""
        return self.loaded is None and self.refusal is None


class Workspace:
    """The folder of the bank at `bank` (a folder, or one file of it)."""

    def __init__(self, bank: Path | str) -> None:
        root = Path(bank)
        self.folder = root.parent if root.is_file() else root

    def path(self, name: str, *, new: bool = False) -> Path:
        """A question-set file of the bank by name; never a path outside the bank folder. With
        `new`, one that need not exist yet."""
        if not FILE_NAME.fullmatch(name):
            raise WorkspaceError(
                "A set's file name is lowercase words joined by '-', ending in .yaml."
            )
        path = self.folder / name
        if not new and path not in question_files(self.folder):
            raise NoSuchFile(f"The bank has no file {name!r}.")
        return path

    def open(self, name: str) -> Opened:
        """The file's text and version, read once (so the version is of the text shown)."""
        path = self.path(name)
        data = self._bytes(path)
        if data is None:
            raise NoSuchFile(f"The bank has no file {name!r}.")
        return Opened(self._text(name, data), version_of(data))

    def read(self, name: str) -> str:
        return self.open(name).text

    @staticmethod
    def _text(name: str, data: bytes) -> str:
        try:
            return decode_set_file(data)
        except Unreadable as exc:
            raise WorkspaceError(
                f"{name} {exc.message} (line {exc.line}, column {exc.col})."
            ) from None

    @staticmethod
    def _bytes(path: Path) -> bytes | None:
        """The file's bytes as they are now (None: not there), read as the loader reads them."""
        try:
            return read_set_bytes(path)
        except Gone:
            return None
        except Unreadable as exc:
            raise WorkspaceError(f"{path.name} {exc.message}.") from None

    def parse(
        self, name: str, text: str, bank: Bank | None = None
    ) -> tuple[LoadedSet | None, list[Problem]]:
        """The file's text as the loader reads it, and its problems. With `bank`, as the bank would
        take it: also an id used twice in the file or already served by another file."""
        loaded, problems, _ = self._parse(name, text, bank)
        return loaded, problems

    def _parse(
        self, name: str, text: str, bank: Bank | None
    ) -> tuple[LoadedSet | None, list[Problem], bool]:
        if len(text.encode("utf-8", "surrogatepass")) > SET_FILE_BYTES:
            raise WorkspaceError(f"That file is over {SET_FILE_BYTES // 1024} KiB.")
        loaded, problems = load_text(text, Path(name).stem, name)
        loads_alone = loaded is not None
        if loaded is not None and bank is not None:
            problems = duplicate_ids(loaded) + ids_taken_elsewhere(loaded, bank, self.folder / name)
            if problems:
                loaded = None
        return loaded, problems, loads_alone

    def check(self, name: str, text: str, bank: Bank) -> Checked:
        """`text` as the bank would take it, saved as `name` (a new file or one of the bank's)."""
        path = self.path(name, new=True)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: it could not even be written
            line = text.count("\n", 0, exc.start) + 1
            raise WorkspaceError(f"Line {line} has a character that is not Unicode text (U+{ord(text[exc.start]):04X}, "
                                 "half of one): nothing was saved.") from None  # fmt: skip
        loaded, problems, loads_alone = self._parse(name, text, bank)
        served = any(Path(s.path).resolve() == path.resolve() for s in bank.sets)
        return Checked(path, text, loaded, problems, served, loads_alone)

    def conflict(self, name: str, version: str) -> Conflict | None:
        """The `Conflict` a save of `name` on `version` would meet now, if any (a save checks
        again, under the lock: this only spares the work before it)."""
        data = self._bytes(self.path(name, new=True))
        return None if version_of(data) == version else self._conflict(name, data)

    def _conflict(self, name: str, data: bytes | None) -> Conflict:
        try:
            current = None if data is None else decode_set_file(data)
        except Unreadable:
            current = data.decode("utf-8", "replace") if data is not None else None
        return Conflict(name, current, version_of(data))

    def create(self, name: str, title: str) -> Path:
        """A new set's file, a draft: its first question in a topic of the set's own (the
        starter's topic counted it in another set's topic on learners' pages), and out of the bank
        until its author has written what the starter leaves to write (`app.bank.schema.Written`)."""
        path = self.path(name, new=True)
        stem = Path(name).stem[:74]
        text = edit.add_question(edit.new_set(title or "New set"), stem + "-first", topic=stem)
        with self._locked():
            if os.path.lexists(path):
                raise WorkspaceError(f"{name} exists already: open it instead.")
            write_atomically(path, text)
        return path

    def save(self, checked: Checked, version: str) -> str:
        """A checked text saved over its file (or as a new one), as a set the bank serves or a
        draft, never one with a `refusal`, and only over the version `version` (what its author
        opened): `Conflict` when the file changed since. Returns the file's new version."""
        if checked.refusal is not None:
            raise WorkspaceError(checked.refusal)
        data = checked.text.encode("utf-8")
        with self._locked():
            now = self._bytes(checked.path)
            if version_of(now) != version:
                raise self._conflict(checked.path.name, now)
            write_atomically(checked.path, checked.text)
        return version_of(data)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The bank folder's lock, held: an exclusive `flock` on the folder itself, which other
        threads (each opens the folder anew) and processes wait for alike."""
        fd = os.open(
            self.folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # the lock goes with the descriptor


def write_atomically(path: Path, text: str) -> None:
    """The server's reload never reads half a file: written beside it, then renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".studio-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
