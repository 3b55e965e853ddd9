"""Where the snippet is on a stack or in a traceback, and which frames are the sandbox's own.

Runs in: the runner (the warnings `sandbox.execute` records and the explainer's op trace both ask
"which snippet line?" here, so the two always agree).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from types import FrameType, FunctionType
from typing import Any

SNIPPET = "<snippet>"
"""The file name the snippet is compiled under; its frames are recognised by it."""

SANDBOX_ROOT = os.path.dirname(os.path.abspath(__file__))
"""The `sandbox` package's folder: every file under it (subpackages too) is the sandbox's own."""


def snippet_line(filename: str = SNIPPET, frame: FrameType | None = None) -> int | None:
    """Line of the innermost frame that belongs to the snippet, walking outwards from `frame`
    (by default the caller's frame): where a warning or an op came from."""
    f: FrameType | None = frame if frame is not None else sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename == filename:
            return f.f_lineno
        f = f.f_back
    return None


def traceback_line(exc: BaseException, filename: str = SNIPPET) -> int | None:
    """Innermost snippet line in an exception's traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def is_sandbox_file(filename: str) -> bool:
    """Is this code file part of the sandbox package (any module, in any of its subpackages)?"""
    return os.path.abspath(filename).startswith(SANDBOX_ROOT + os.sep)


Caller = Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]
"""`call(func, args, kwargs)`: `func(*args, **kwargs)`, made from where `called_from` says."""

STAND_IN = "<the call made here>"
"""The name of `called_from`'s functions' code, by which a traceback's frames of theirs are known."""
_CALL = (lambda func, args, kwargs: func(*args, **kwargs)).__code__.replace(
    co_name=STAND_IN
)  # one line: see `called_from`
_stand_ins: dict[tuple[int, int], tuple[Any, Caller]] = {}
"""By (id of the frame's code, its line): the code, kept so that its id is not another's, and its stand-in."""


def plain_call(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`func(*args, **kwargs)`, from the frame that calls this: a `Caller` that stands in for no one."""
    return func(*args, **kwargs)


def called_from(frame: FrameType) -> Caller:
    """A function calling `func(*args, **kwargs)` from a frame that Python's warnings take for
    `frame`: the same file, line and module globals (so the same once-per-place record). The
    explainer calls torch through it: called from the explainer's own frame, a warning torch
    raised "at its caller" (a `stacklevel`, or C++'s current frame) named the explainer's file and
    line, so the same warning from two lines of the snippet was shown once, at neither line.
    Its code is one line long, so every line it runs is `frame`'s line."""
    code = frame.f_code
    if frame.f_lineno is None:  # a code object without a line table: nothing to stand in for
        return plain_call
    known = _stand_ins.get(
        (id(code), frame.f_lineno)
    )  # an id: hashing a code object hashes its contents
    if known is not None and known[0] is code:
        return known[1]
    stand_in = FunctionType(
        _CALL.replace(co_filename=code.co_filename, co_firstlineno=frame.f_lineno), frame.f_globals
    )
    _stand_ins[id(code), frame.f_lineno] = (code, stand_in)
    return stand_in


_QUOTED_FRAME = re.compile(
    r'  File "(?P<file>[^"\n]*)", line \d+, in (?P<name>[^\n]*)\n(?:    [^\n]*\n){0,2}'
)
"""A frame as Python quotes it in a stack: its file line, then its source line (and carets)."""


def without_sandbox_frames(text: str) -> str:
    """`text` (a warning quoting a stack: anomaly mode's "Traceback of forward call that caused the
    error") less the frames a fresh `python snippet.py` does not have: the runner's own, from
    `runpy` to the exec of the snippet, and the explainer's. They came first, and the message's
    cap then cut off the snippet's own frame, the one line it was quoted for."""
    if 'File "' not in text:
        return text
    return _QUOTED_FRAME.sub(lambda m: "" if _machinery(m["file"], m["name"]) else m[0], text)


def _machinery(filename: str, name: str) -> bool:
    return (
        filename.startswith("<frozen runpy>")
        or name == STAND_IN
        or (not filename.startswith("<") and is_sandbox_file(filename))
    )
