"""The bank as a writable folder: what the studio may read and write there, and how.

- File names: a set's file is lowercase words joined by '-', ending in .yaml (`FILE_NAME`): no
  folder in it, so every name stays inside the bank's folder (`Workspace.path`), and an existing
  file is one the loader reads (`question_files`).
- What the bank would take: a file's text read by the loader, plus an id used twice in it or
  already served by another file (either leaves the file out whole, as `ampquiz lint` says).
- Drafts: a file learners are not served (a new set, one left out already) that the loader itself
  refuses is saved as it is, a draft, out of the bank until its author finishes it. A file
  learners are served is never saved with problems (they would lose its questions), nor one that
  loads but takes another file's ids (on the next start it would contend for them).
- Saving is atomic (a temporary file renamed over the old one): the live bank's reload never
  reads half a file.

No web framework: the studio's routes call this, and say its errors (`WorkspaceError`) as they are.
Editing the text itself, keeping comments and order, is `app.bank.edit`'s.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from app.bank import edit
from app.bank.load import (
    Bank,
    LoadedSet,
    duplicate_ids,
    ids_taken_elsewhere,
    load_text,
    question_files,
)
from app.bank.problem import Problem

FILE_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*\.ya?ml$")
"""A set file's name: lowercase words joined by '-', ending in .yaml (or .yml)."""
SET_FILE_BYTES = 512 * 1024
"""The largest question-set file the studio reads."""


class WorkspaceError(ValueError):
    """What the bank's folder refuses; the message is a sentence for the author."""


class NoSuchFile(WorkspaceError, LookupError):
    """A name the bank has no file for."""


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
        if not FILE_NAME.match(name):
            raise WorkspaceError(
                "A set's file name is lowercase words joined by '-', ending in .yaml."
            )
        path = self.folder / name
        if not new and path not in question_files(self.folder):
            raise NoSuchFile(f"The bank has no file {name!r}.")
        return path

    def read(self, name: str) -> str:
        return self.path(name).read_text(encoding="utf-8")

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
        loaded, problems, loads_alone = self._parse(name, text, bank)
        served = any(Path(s.path).resolve() == path.resolve() for s in bank.sets)
        return Checked(path, text, loaded, problems, served, loads_alone)

    def create(self, name: str, title: str) -> Path:
        """A new set's file, a draft: its first question in a topic of the set's own (the
        starter's topic counted it in another set's topic on learners' pages), and out of the bank
        until its author has written what the starter leaves to write (`app.bank.schema.Written`)."""
        path = self.path(name, new=True)
        if path.exists():
            raise WorkspaceError(f"{name} exists already: open it instead.")
        stem = Path(name).stem[:74]
        write_atomically(
            path, edit.add_question(edit.new_set(title or "New set"), stem + "-first", topic=stem)
        )
        return path

    def save(self, checked: Checked) -> None:
        """A checked text saved over its file (or as a new one): as a set the bank serves, or a
        draft; never one with a `refusal`."""
        if checked.refusal is not None:
            raise WorkspaceError(checked.refusal)
        write_atomically(checked.path, checked.text)


def write_atomically(path: Path, text: str) -> None:
    """The server's reload never reads half a file: written beside it, then renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".studio-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
