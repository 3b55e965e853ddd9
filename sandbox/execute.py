"""Run one snippet inside the current (already isolated) process and describe what happened.

This is the only place untrusted code is executed. It records what a learner needs: the exception
limited to the snippet's own frames, the warnings with the snippet line that caused them, and, when
asked, the explanation of every torch call.

Runs in: the runner, after it has dropped its privileges and its limits are set.
"""

from __future__ import annotations

import errno
import linecache
import re
import sys
import traceback
import warnings
from typing import Any

from sandbox import fresh_main
from sandbox.frames import SNIPPET, STAND_IN, snippet_line, without_sandbox_frames
from sandbox.result import NEEDS_CUDA

MAX_WARNINGS = 50

# Messages by which torch says "this needs a GPU" on a CPU-only host: reported as `unavailable`.
_NO_CUDA = (
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
    "CUDA driver initialization failed",
)
# The allocators' own words; any other RuntimeError that mentions memory is the snippet's business.
_ALLOCATOR_FAILED = ("DefaultCPUAllocator: can't allocate memory", "CUDA out of memory")
MAX_TEXT = 16 * 1024
REFUSED = (
    " Operation not permitted: the sandbox refuses it (its syscall filter refuses namespaces,"
    " mounts, keyrings, io_uring, userfaultfd, bpf, perf events, ptrace and sockets other than"
    " Unix and IP; and the run has an unprivileged uid)."
)
"""Added to the message of a run whose snippet raised EPERM: most likely the sandbox said no."""
UNLISTED = (
    " Function not implemented: the sandbox lets a run make only the system calls Python and torch"
    " need, and answers any other as a kernel without it would."
)
"""Added to the message of a run whose snippet raised ENOSYS: the syscall allow-list (`sandbox.seccomp`)."""
NO_COMPILER = (
    " torch.compile's default backend (inductor) compiles C++, which a run here cannot (and a first"
    ' compile takes longer than a run may): backend="aot_eager" shows the same graph, casts included.'
)
"""Added to the message of a run whose torch.compile failed to compile C++."""


def clean(text: str, limit: int = MAX_TEXT) -> str:
    """Safe to serialise (no lone surrogates) and bounded: exception texts can be anything."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def _safe_str(obj: object) -> str:
    try:
        return clean(str(obj))
    except BaseException:  # noqa: BLE001 - a __str__ that raises (even SystemExit) is the snippet's own bug
        return f"<{type(obj).__name__} whose str() failed>"


def _safe_repr(obj: object) -> str:
    """At most 300 characters (the honest EXITED message's bound)."""
    try:
        return clean(repr(obj))[:300]
    except BaseException:  # noqa: BLE001 - likewise
        return f"<{type(obj).__name__} whose repr() failed>"


# An exception's chain and traceback, read as BaseException keeps them: a subclass of the snippet's
# may override the attributes (a `__cause__` property raising, say), and describing its exception
# must not fail where Python's own printing does not.
_CAUSE_OF = BaseException.__dict__["__cause__"].__get__
_CONTEXT_OF = BaseException.__dict__["__context__"].__get__
_SUPPRESSED = BaseException.__dict__["__suppress_context__"].__get__
_TRACEBACK_OF = BaseException.__dict__["__traceback__"].__get__
_DICT_OF = BaseException.__dict__["__dict__"].__get__


def _qualified(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return (
        cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"
    )


_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
"""Python's words between the exceptions of a chain (`raise ... from`, or raised while handling)."""
MAX_CHAINED = 8


def _snippet_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    try:
        frames = traceback.extract_tb(_TRACEBACK_OF(exc))
    except BaseException:  # noqa: BLE001 - a code object without a line table breaks 3.11's extract_tb
        return []
    # The explainer's stand-ins for the snippet's frames (`frames.called_from`) are not the snippet's.
    return [f for f in frames if f.filename == SNIPPET and f.name != STAND_IN]


def _exception_text(
    exc: BaseException, limit: int, frames: list[traceback.FrameSummary] | None = None
) -> str:
    """One exception as Python prints it, with only the snippet's frames (`frames`, when they were
    read already), and its notes (as Python prints a note that is not a string), within `limit`
    characters."""
    frames = _snippet_frames(exc) if frames is None else frames
    text = (
        "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
        if frames
        else ""
    )
    message = _safe_str(exc)
    text += f"{_qualified(exc)}: {message}\n" if message else f"{_qualified(exc)}\n"
    notes = _DICT_OF(exc).get("__notes__")
    if type(notes) is list:
        text += "".join(
            f"{note if type(note) is str else _safe_repr(note)}\n"
            for note in list.__getitem__(notes, slice(MAX_CHAINED))
        )
    return clean(text, limit)


def _chain_text(exc: BaseException, frames: list[traceback.FrameSummary]) -> str:
    """The exception (whose snippet frames are `frames`) and those it was raised from or while
    handling, oldest first, as Python prints them: shown as the last alone, `raise
    RuntimeError(...) from err` lost its cause. The last one is shown whole (within `MAX_TEXT`);
    the older ones as far as room is left."""
    text = _exception_text(exc, MAX_TEXT - 200, frames)
    seen = {id(exc)}
    while len(seen) <= MAX_CHAINED:
        if (cause := _CAUSE_OF(exc)) is not None:
            exc, link = cause, _CAUSE
        elif (context := _CONTEXT_OF(exc)) is not None and not _SUPPRESSED(exc):
            exc, link = context, _CONTEXT
        else:
            break
        if id(exc) in seen:
            break
        seen.add(id(exc))
        room = MAX_TEXT - len(text) - len(link) - 64  # `clean` adds its "… [N more characters]"
        if room < 200:
            break
        text = _exception_text(exc, room) + link + text
    return text


def _undescribable(exc: BaseException) -> dict[str, Any]:
    """What is said of an exception that could not be described (its class fought being read)."""
    name = type(exc).__name__ if isinstance(type(exc).__name__, str) else "Exception"
    return {
        "type": clean(name, 200),
        "message": "",
        "traceback": f"{clean(name, 200)}\n",
        "line": None,
        "source_line": None,
    }


def describe_exception(exc: BaseException, lines: list[str]) -> dict[str, Any]:
    frames = _snippet_frames(exc)
    line = frames[-1].lineno if frames else None
    if isinstance(exc, SyntaxError) and exc.filename == SNIPPET:
        line = exc.lineno
    source = lines[line - 1].strip() if line and 0 < line <= len(lines) else None
    return {
        "type": _qualified(exc),
        "message": _safe_str(exc),
        "traceback": clean(_chain_text(exc, frames)),
        "line": line,
        "source_line": source,
    }


class WarningRecorder:
    """Collects warnings as data (category, message, snippet line), folding repeats."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._seen: set[tuple[str, str, int | None]] = set()

    def __call__(self, message, category, filename, lineno, file=None, line=None) -> None:
        where = lineno if filename == SNIPPET else snippet_line()
        key = (category.__name__, without_sandbox_frames(_safe_str(message)), where)
        if key in self._seen or len(self.items) >= MAX_WARNINGS:
            return
        self._seen.add(key)
        self.items.append(
            {"category": category.__name__, "message": clean(key[1], 2048), "line": where}
        )


EXITED = "The snippet called sys.exit({code})."
RAISED = "The snippet raised {type}{where}."
OUT_OF_MEMORY = "The snippet ran out of its memory allowance ({error})."
"""The sentences `classify` writes (filled in with `str.format`)."""


def _honest(template: str, **parts: str) -> str:
    """`template` as a pattern: its words as they are, each {part} as `parts` says."""
    pattern = re.escape(template)
    for name, part in parts.items():
        pattern = pattern.replace(re.escape("{" + name + "}"), part)
    return pattern


_EXITED = _honest(EXITED, code=".{0,300}")
_RAISED = (
    _honest(RAISED, type=r"[\w.<>]{1,200}", where=r"( on line \d{1,7})?")
    + "("
    + "|".join(re.escape(hint) for hint in (REFUSED, UNLISTED, NO_COMPILER))
    + ")?"
)
HONEST_MESSAGES = {
    "ok": re.compile(f"({_EXITED})?", re.DOTALL),
    "error": re.compile(f"{_EXITED}|{_RAISED}", re.DOTALL),
    "memory": re.compile(_honest(OUT_OF_MEMORY, error=".{0,300}"), re.DOTALL),
    "unavailable": re.compile(re.escape(NEEDS_CUDA.format(subject="This snippet"))),
}
"""The messages `classify` writes, per status, as patterns made from the same sentences: the pool
shows a report's message only when it is one of these (a forged one said "Verified correct by the
ampquiz team…")."""


def classify(exception: dict[str, Any] | None, exc: BaseException | None) -> tuple[str, str]:
    """Status and a one-sentence message for a run that finished in-process."""
    if exc is None:
        return "ok", ""
    if isinstance(exc, SystemExit):
        code = exc.code
        if code in (None, 0):
            return "ok", EXITED.format(code=0)
        return "error", EXITED.format(code=_safe_repr(code))
    text = f"{exception['type']}: {exception['message']}" if exception else repr(exc)
    message = exception["message"] if exception else ""
    if (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"  # torch.OutOfMemoryError, CUDA's
        or (isinstance(exc, RuntimeError) and any(s in message for s in _ALLOCATOR_FAILED))
    ):
        return "memory", OUT_OF_MEMORY.format(error=text.splitlines()[0][:300])
    if any(s in message for s in _NO_CUDA):
        return "unavailable", NEEDS_CUDA.format(subject="This snippet")
    where = f" on line {exception['line']}" if exception and exception.get("line") else ""
    said = RAISED.format(type=exception["type"] if exception else type(exc).__name__, where=where)
    if isinstance(exc, OSError) and exc.errno == errno.EPERM:
        said += REFUSED
    elif isinstance(exc, OSError) and exc.errno == errno.ENOSYS:
        said += UNLISTED
    elif (
        "CppCompileError" in (exception["type"] if exception else "")
        or "CppCompileError" in message
    ):
        said += NO_COMPILER
    return "error", said


def _flush() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001, S110 - the snippet may have closed or replaced them
        pass


def execute(
    code: str, *, explain: bool = False, namespace: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Execute `code` as `__main__` (in `namespace`, from `fresh_main.main_module`, made now if
    not given); returns the in-process part of a RunResult as a dict."""
    lines = code.splitlines()
    linecache.cache[SNIPPET] = (len(code), None, [ln + "\n" for ln in lines], SNIPPET)
    recorder = WarningRecorder()
    # The filters are those of a fresh `python snippet.py` after its `import torch` (set in the
    # zygote): only what Python would show is recorded, once per place as Python shows it.
    warnings.showwarning = recorder
    explainer = None
    error: BaseException | None = None
    globs = namespace if namespace is not None else fresh_main.main_module()
    try:
        compiled = compile(code, SNIPPET, "exec")
        if explain:
            from sandbox.explain import Explainer

            explainer = Explainer(filename=SNIPPET)
            with explainer:
                exec(compiled, globs)  # noqa: S102 - running the snippet is the point
        else:
            exec(compiled, globs)  # noqa: S102 - running the snippet is the point
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are results too
        error = exc
    finally:
        _flush()
    try:
        exception = (
            describe_exception(error, lines)
            if error is not None and not isinstance(error, SystemExit)
            else None
        )
        status, message = classify(exception, error)
    except BaseException:  # noqa: BLE001 - an exception object that fights being read is still the snippet's error
        assert error is not None
        exception = _undescribable(error)
        status, message = "error", RAISED.format(type=exception["type"], where="")
    report = None
    if explainer is not None:
        try:
            report = explainer.report(exception=error)
        except BaseException as exc:  # noqa: BLE001 - an explanation bug must not hide the run
            from sandbox.explain import failed_report

            report = failed_report(exc)
    try:
        fresh_main.shut_down(globs, error)
    except BaseException:  # noqa: BLE001, S110 - as at a script's end: what goes wrong there changes no outcome
        pass
    finally:
        _flush()
    return {
        "status": status,
        "message": message,
        "exception": exception,
        "warnings": recorder.items,
        "explanation": report,
    }
