"""Where the snippet is on a stack or in a traceback, and which frames are the sandbox's own.

Runs in: the runner (the warnings `sandbox.execute` records and the explainer's op trace both ask
"which snippet line?" here, so the two always agree).
"""

from __future__ import annotations

import os
import sys
from types import FrameType

SNIPPET = "<snippet>"
"""The file name the snippet is compiled under; its frames are recognised by it."""

SANDBOX_ROOT = os.path.dirname(os.path.abspath(__file__))
"""The `sandbox` package's folder: every file under it (subpackages too) is the sandbox's own."""


def snippet_line(filename: str = SNIPPET, frame: FrameType | None = None) -> int | None:
    """Line of the innermost frame that belongs to the snippet, walking outwards from `frame`
    (by default the caller's frame): where a warning or an op came from."""
    f = frame if frame is not None else sys._getframe(1)
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
