"""Reading a set file as the bank takes it: the plain files of its folder named `FILE_NAME`, at most
`MAX_FILE_BYTES`, UTF-8 (a BOM allowed); anything else (a folder, a link, a pipe, a file gone
between listing and reading) is `Unreadable`, which the loader reports at the file's path."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

FILE_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\.yaml")
"""A set file's name, matched whole (`fullmatch`: `$` takes a trailing newline): lowercase words
joined by '-', ending in .yaml. Its stem is the set's id, so no two files share one (`x.yml`
beside `x.yaml` was served as a second set `x`)."""
MAX_FILE_BYTES = 512 * 1024
"""The largest set file the bank reads (the real bank's largest is under 40 KiB)."""
_BOM = b"\xef\xbb\xbf"


class Unreadable(Exception):
    """Why a set file cannot be read as text, at the line (1-based) and column it concerns."""

    def __init__(self, message: str, line: int = 1, col: int = 1) -> None:
        super().__init__(message)
        self.message, self.line, self.col = message, line, col


def shown_path(path: Path) -> str:
    """A path as problems show it: a name that is no UTF-8 (Python holds its bytes as lone
    surrogates, which no page, log or terminal can print) with those bytes as `\\xe9`."""
    shown = str(path)
    try:
        shown.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return shown


def name_problem(name: str) -> str | None:
    """Why a file name is not a set file's (`FILE_NAME`), or None."""
    if FILE_NAME.fullmatch(name):
        return None
    stem = name.rsplit(".", 1)[0]
    better = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")
    hint = f": rename it {better}.yaml" if better and better + ".yaml" != name else ""
    return f"a set's file name is lowercase words joined by '-', ending in .yaml{hint} (the bank leaves it out until then)"


class Gone(Unreadable):
    """The file is not there (any more)."""


def read_set_file(path: Path) -> str:
    """A set file's text (`read_set_bytes`, `decode_set_file`); `Unreadable` says why not."""
    return decode_set_file(read_set_bytes(path))


def read_set_bytes(path: Path) -> bytes:
    """A set file's bytes; `Unreadable` says why not (`Gone`: it is not there). Only a plain file
    (not a folder, a pipe that would block the reader for good, or a link, which could reach out
    of the bank) of at most `MAX_FILE_BYTES`."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise Gone("the file is no longer there (removed while the bank was read)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unreadable(
                "is a symbolic link: the bank reads only the plain files in its folder"
            ) from None
        raise Unreadable(f"cannot read the file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Unreadable(
                "is a folder, not a file: rename it, or move it out of the bank's folder"
            )
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(
                "is not a plain file (a pipe, a socket or a device): the bank reads only plain files"
            )
        if st.st_size > MAX_FILE_BYTES:
            raise Unreadable(f"the file is over {MAX_FILE_BYTES // 1024} KiB: split it into sets")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise Unreadable(f"cannot read the file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_FILE_BYTES:  # it grew while being read
        raise Unreadable(f"the file is over {MAX_FILE_BYTES // 1024} KiB: split it into sets")
    return b"".join(chunks)


def decode_set_file(data: bytes) -> str:
    """A set file's bytes as text (UTF-8, a byte order mark read past); `Unreadable` at the line
    of the first byte that is not UTF-8."""
    data = data.removeprefix(_BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line_start = before.rfind(b"\n") + 1
        col = len(before[line_start:].decode("utf-8", "replace")) + 1
        raise Unreadable(f"is not UTF-8 text: the byte 0x{data[exc.start]:02x} here is not UTF-8 (save the file "
                         "as UTF-8)", before.count(b"\n") + 1, col) from None  # fmt: skip
