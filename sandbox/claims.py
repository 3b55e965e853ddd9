"""What a runner's report claims, checked in the pool before anything else sees it.

The report comes from the snippet's own process (see `sandbox.ending`): every field is bounded
and shape-checked here, the fields a learner's page renders most of all. Bounds are those of an
honest report (`sandbox.execute`, `sandbox.explain`; a test holds them together), so no honest
report is ever cut, and a forged one costs the web at most what the largest honest one does.
What cannot be checked is still only a claim; `sandbox.collect` decides the status from how the
process ended.

Runs in: the server. It imports neither torch nor `sandbox.explain` (the web must stay light).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.ending import CLAIMABLE
from sandbox.execute import HONEST_MESSAGES, RAISED
from sandbox.result import NEEDS_CUDA, ExceptionInfo, Status, WarningInfo

# An honest report's bounds (sandbox.execute: MAX_TEXT plus its "… [N more characters]" marker,
# MAX_WARNINGS; sandbox.explain: MAX_REPORT_BYTES, max_ops, MAX_EVENTS, MAX_HAZARDS, MAX_SENTENCES).
MAX_TEXT = 16 * 1024 + 64
MAX_WARNINGS = 50
MAX_WARNING_TEXT = 2048
EXPLANATION_BYTES = 48_000
MAX_OPS, MAX_SCALER_EVENTS, MAX_HAZARDS, MAX_SENTENCES = 200, 100, 50, 4
_SHORT, _LONG = 300, 2000

DROPPED_EXPLANATION = "The run's explanation was malformed or too large, so it was dropped."


class Malformed(ValueError):
    """The report is not one an honest runner writes."""


@dataclass
class Claim:
    status: Status
    """One of CLAIMABLE, or "killed" for the runner's own crash."""
    message: str = ""
    exception: ExceptionInfo | None = None
    warnings: list[WarningInfo] = field(default_factory=list)
    explanation: dict[str, Any] | None = None


_UNSEEN_CODES = (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0), 0xAD, 0x061C, 0x180E,
                 *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065), *range(0x2066, 0x206A),
                 0xFEFF)  # fmt: skip
"""Characters that hide or reorder what a page shows rather than show themselves: terminal
escapes and other controls (tabs and line ends aside), bidirectional overrides (U+202E turned a
printed line around on the page), zero-width and invisible ones (a word joiner, U+2060, printed
alone was proved as a key no learner could see or type)."""
_UNSEEN = re.compile("[" + "".join(re.escape(chr(code)) for code in _UNSEEN_CODES) + "]")
_ESCAPES = {code: ascii(chr(code))[1:-1] for code in _UNSEEN_CODES}
"""Each as the escape Python's repr() gives it (`\x1b`, `\u202e`), for `str.translate` (in C):
one Python call per character (a `re.sub` callback) made 64 KB of them cost the server 29 ms of
CPU, ten times the run that printed them (an attacker's review); translated, 4 to 6 ms."""


def shown(text: str) -> str:
    """`text` as a page or a JSON answer may carry it: any lone surrogate written out as its
    escape, as the runner writes an honest report's texts (`sandbox.execute.clean`; encoding one
    as UTF-8 failed, and a forged one broke an interview's report for good), and each character
    of `_UNSEEN` as the escape Python's repr() gives it (`\x1b`, `\u202e`). Used on everything a
    run reports or prints."""
    if not text.isprintable() and _UNSEEN.search(text):
        text = text.translate(_ESCAPES)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        raise Malformed("a text field is not text")
    return shown(value[:limit])[:limit]


def _line(value: Any, lines: int) -> int | None:
    """A snippet line, or None: a number outside the snippet is no line of it."""
    return value if type(value) is int and 1 <= value <= lines + 1 else None


CRASH_PREFIX = "sandbox runner failed: "
"""How the runner's report of its own failure starts (`runner._report_crash`); a crash report
that does not is shown as these words alone."""


def _honest_message(status: str, message: str, exception: ExceptionInfo | None) -> str:
    """The report's message when it is one the runner writes for its status; otherwise the plain
    one for that status, so that a forged notice is never shown as the sandbox's own words."""
    if HONEST_MESSAGES[status].fullmatch(message):
        return message
    if status == "error":
        return (
            RAISED.format(type=exception.type, where="")
            if exception
            else "The snippet ended with an error."
        )
    return {
        "memory": "The snippet ran out of its memory allowance.",
        "unavailable": NEEDS_CUDA.format(subject="This snippet"),
    }.get(status, "")


def read_claim(report: dict[str, Any], code: str, explain: bool) -> Claim:
    """The report's fields, bounded; raises `Malformed` for a report no honest runner writes."""
    # The runner's own failure: "sandbox runner failed: <exception>".
    if report.get("type") == "crash":
        said = _text(report.get("message", ""), 4096)
        return Claim("killed", said if said.startswith(CRASH_PREFIX) else CRASH_PREFIX.rstrip(": "))
    status = report.get("status")
    if status not in CLAIMABLE:
        raise Malformed(f"a report may not claim the status {str(status)[:40]!r}")
    lines = code.splitlines()
    exception = None
    exc = report.get("exception")
    if isinstance(exc, dict) and status != "ok":
        line = _line(exc.get("line"), len(lines))
        exception = ExceptionInfo(
            type=_text(exc.get("type"), 200) or "Exception",
            message=_text(exc.get("message", ""), MAX_TEXT),
            traceback=_text(exc.get("traceback", ""), MAX_TEXT),
            line=line,
            # The pool has the code: the line's text is read from it, not taken from the report.
            source_line=lines[line - 1].strip() if line and line <= len(lines) else None,
        )
    elif exc is not None and not isinstance(exc, dict):
        raise Malformed("the exception is not an object")
    warnings = report.get("warnings") or []
    if not isinstance(warnings, list) or len(warnings) > MAX_WARNINGS:
        raise Malformed("too many warnings, or not a list")
    return Claim(
        status=status,
        message=_honest_message(status, _text(report.get("message", ""), 4096), exception),
        exception=exception,
        warnings=[
            WarningInfo(
                _text(w.get("category"), 200),
                _text(w.get("message"), MAX_WARNING_TEXT + 64),
                _line(w.get("line"), len(lines)),
            )
            for w in warnings
            if isinstance(w, dict)
        ],
        explanation=checked_explanation(report.get("explanation")) if explain else None,
    )


# ---- the explanation: its declared shape (sandbox/explain/report.py), with bounds ------------

Check = Callable[[Any], bool]


def _str(limit: int) -> Check:
    return lambda v: isinstance(v, str) and len(v) <= limit


def _opt(check: Check) -> Check:
    return lambda v: v is None or check(v)


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v < 1 << 53


def _number(v: Any) -> bool:
    return type(v) in (int, float) or v in ("inf", "-inf", "nan")


def _flag(v: Any) -> bool:
    return type(v) is bool


def _list(check: Check, most: int) -> Check:
    return lambda v: isinstance(v, list) and len(v) <= most and all(check(x) for x in v)


def _record(required: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    optional = optional or {}

    def check(v: Any) -> bool:
        if not isinstance(v, dict) or not required.keys() <= v.keys():
            return False
        return all(
            (required.get(k) or optional.get(k) or (lambda _: False))(x) for k, x in v.items()
        )

    return check


def _one_of(*values: str) -> Check:
    return lambda v: v in values


_LINE = _opt(_count)
REGION_KINDS = ("custom_fwd", "custom_fwd_cast", "custom_bwd", "recompute", "backward", "compiled")
HAZARD_KINDS = ("overflow", "underflow", "absorption", "stale_cast", "cast_dtype")
"""As `sandbox.explain.report` declares them (`RegionKind`, `HazardKind`; a test holds them equal)."""
_TENSOR = _record({"dtype": _str(64), "shape": _list(_count, 64), "device": _opt(_str(64))})
_OP = _record(
    {
        "name": _str(_SHORT), "line": _LINE, "count": _count, "inputs": _list(_TENSOR, 6),
        "output": _opt(_TENSOR), "autocast": _opt(_record({"device_type": _str(64), "dtype": _str(64)})),
        "casts": _list(_record({"from": _str(64), "to": _str(64), "shape": _list(_count, 64)}), 4),
        "reason": _str(_LONG),
    },
    {
        "inputs_total": _count, "casts_total": _count, "error": _str(_SHORT),
        "reused": _list(_record({"dtype": _str(64), "shape": _list(_count, 64), "line": _LINE}), 4),
        "region": _record({"kind": _one_of(*REGION_KINDS), "text": _str(_SHORT)}),
    },
)  # fmt: skip
_SCALER_EVENT = _record(
    {"event": _one_of("scale", "unscale_", "inf_check", "step", "update", "misuse", "error"), "line": _LINE, "count": _count},
    {
        "enabled": _flag, "scale": _opt(_number), "explicit": _flag, "found_inf": _flag, "taken": _flag,
        "old_scale": _opt(_number), "new_scale": _opt(_number), "call": _str(64), "error": _str(_SHORT),
        "change": _one_of("unchanged", "halved", "doubled", "lowered", "raised"), "message": _str(_LONG),
        "in_optimizer": _flag, "unchanged": _flag, "state_created": _count, "unscaled_loss": _flag,
    },
)  # fmt: skip
_HAZARD = _record(
    {
        "kind": _one_of(*HAZARD_KINDS), "line": _LINE, "op": _str(_SHORT),
        "aten": _str(_SHORT), "dtype": _str(64), "count": _count, "message": _str(_LONG),
    }
)  # fmt: skip
_ERROR = _record(
    {
        "type": _str(200),
        "message": _str(_SHORT),
        "line": _LINE,
        "explanation": _opt(_str(_LONG)),
        "source": _opt(_str(_SHORT)),
    }
)
_REPORT = _record(
    {"summary": _list(_str(4096), MAX_SENTENCES), "ops": _list(_OP, MAX_OPS),
     "scaler": _list(_SCALER_EVENT, MAX_SCALER_EVENTS), "hazards": _list(_HAZARD, MAX_HAZARDS)},
    {
        "ops_truncated": _flag, "ops_total": _count, "calls_total": _count, "scaler_truncated": _flag,
        "hazards_truncated": _flag, "error": _opt(_ERROR), "explainer_errors": _list(_str(_LONG), 3),
    },
)  # fmt: skip


def _measure(value: Any, budget: int) -> tuple[int, bool]:
    """At most JSON's length of `value` (non-ASCII text counted once), stopping past `budget`;
    and whether a text in it needs `shown` to change it. One walk: an
    honest explanation's texts are ASCII, and need no second one."""
    size, stack, unsafe = 0, [value], False
    while stack and size <= budget:
        v = stack.pop()
        if isinstance(v, str):
            size += len(v) + 2
            unsafe = unsafe or shown(v) is not v
        elif isinstance(v, dict):
            size += 2 + 4 * len(v)
            for k, x in v.items():
                size += len(k)
                stack.append(x)
        elif isinstance(v, list):
            size += 2 + 2 * len(v)
            stack.extend(v)
        else:
            size += 5
    return size, unsafe


def _with_shown_texts(value: Any) -> Any:
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {k: _with_shown_texts(x) for k, x in value.items()}
    if isinstance(value, list):
        return [_with_shown_texts(x) for x in value]
    return value


def checked_explanation(value: Any) -> dict[str, Any]:
    """The explanation if it has an honest one's shape and size (its texts serialisable), else a
    one-sentence stand-in."""
    if isinstance(value, dict):
        size, unsafe = _measure(value, EXPLANATION_BYTES)
        if size <= EXPLANATION_BYTES and _REPORT(value):
            return _with_shown_texts(value) if unsafe else value
    return {"summary": [DROPPED_EXPLANATION], "ops": [], "scaler": [], "hazards": []}
