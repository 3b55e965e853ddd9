"""Explain a snippet's mixed-precision behaviour: the ops it ran, GradScaler's decisions, fp16 hazards.

Usage (inside the sandbox child process)::

    explainer = Explainer(filename="<snippet>", max_ops=200)
    with explainer:                      # installs tracing; never swallows exceptions
        exec(compile(code, "<snippet>", "exec"), globs)
    report = explainer.report(exception=exc_or_None)   # JSON-serialisable dict

Nothing is installed until `with explainer:`; everything is removed on exit. The report is bounded
(ops are folded per line and signature and capped; see `MAX_REPORT_BYTES`), so a long training loop
stays small. Only torch and the standard library are imported: this runs in the sandbox child.
"""

from __future__ import annotations

import json
import math
from types import TracebackType
from typing import Any, Self

from sandbox.explain_calls import snippet_line, traceback_line
from sandbox.explain_hazards import HazardChecker
from sandbox.explain_ops import OpTracer
from sandbox.explain_scaler import ScalerMonitor, explain_scaler_error

__all__ = ["MAX_REPORT_BYTES", "Explainer"]

MAX_REPORT_BYTES = 48_000
"""JSON size the report is trimmed to (ops are dropped from the end first)."""
MAX_SENTENCES = 4


class Explainer:
    """Context manager that traces one snippet run and then describes it with `report()`."""

    def __init__(self, filename: str = "<snippet>", max_ops: int = 200) -> None:
        self.filename = filename
        self.max_ops = max(1, int(max_ops))
        self._tracer: OpTracer | None = None
        self._hazards: HazardChecker | None = None
        self._scaler: ScalerMonitor | None = None
        self._exit_exc: BaseException | None = None

    def __enter__(self) -> Self:
        filename = self.filename
        tracer = OpTracer(filename, self.max_ops)
        hazards = HazardChecker(
            line_of=lambda call: call.snippet_line(filename) if call else snippet_line(filename)
        )
        scaler = ScalerMonitor(lambda: snippet_line(filename), tracer, filename)
        tracer.before_dispatch = hazards.before
        tracer.after_dispatch = hazards.after

        def after_call(call: Any, func: Any, args: Any, kwargs: Any, out: Any) -> None:
            scaler.after_call(call.name, call.line, args, out)
            hazards.after_function(call, func, args, kwargs, out)

        tracer.after_call = after_call
        self._tracer, self._hazards, self._scaler = tracer, hazards, scaler
        scaler.install()
        try:
            tracer.install()
        except BaseException:
            scaler.uninstall()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._tracer is not None:
            self._tracer.uninstall()
        if self._scaler is not None:
            self._scaler.uninstall()
        self._exit_exc = exc
        return False

    # -- the report ---------------------------------------------------------------------------

    def report(self, exception: BaseException | None = None) -> dict[str, Any]:
        """Everything observed, as plain JSON data, with a short summary first."""
        exc = exception if exception is not None else self._exit_exc
        tracer, hazards, scaler = self._tracer, self._hazards, self._scaler
        if tracer is None or hazards is None or scaler is None:
            tracer, hazards = OpTracer(self.filename, self.max_ops), HazardChecker(lambda c: None)
            scaler = ScalerMonitor(lambda: None, tracer, self.filename)
        error = self._error(exc, tracer, scaler) if exc is not None else None
        report: dict[str, Any] = {
            "summary": [],
            "ops": tracer.ops,
            "ops_truncated": tracer.truncated,
            "ops_total": tracer.ops_total,
            "calls_total": tracer.calls_total,
            "scaler": scaler.events,
            "scaler_truncated": scaler.truncated,
            "hazards": hazards.hazards,
            "hazards_truncated": hazards.truncated,
            "error": error,
        }
        if tracer.errors:
            report["explainer_errors"] = list(tracer.errors)
        report = _plain(report)
        report["summary"] = summarize(report)
        return _trim(report)

    def _error(self, exc: BaseException, tracer: OpTracer, scaler: ScalerMonitor) -> dict[str, Any]:
        """What went wrong, tied to the snippet line and, when possible, to a traced call."""
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        info: dict[str, Any] = {
            "type": type(exc).__name__,
            "message": first[:300],
            "line": traceback_line(exc, self.filename),
            "explanation": None,
            "source": None,
        }
        event = scaler.error_for(exc)
        if event is not None:
            info.update(explanation=event["message"], source=f"scaler.{event['call']}()")
            if event.get("line") is not None:
                info["line"] = event["line"]
            return info
        text = explain_scaler_error(exc)
        if text is not None:
            info.update(explanation=text, source="GradScaler")
            return info
        if tracer.last_failed is not None and tracer.last_failed[0] is exc:
            entry = tracer.last_failed[1]
            info.update(source=entry["name"], line=entry["line"], explanation=_op_error_hint(entry))
        return info


def _op_error_hint(entry: dict[str, Any]) -> str | None:
    """Why a traced op failed, when the inputs' dtypes tell the story."""
    floats = []
    for d in entry.get("inputs", []):
        if d["dtype"] in ("float16", "bfloat16", "float32", "float64") and d["dtype"] not in floats:
            floats.append(d["dtype"])
    if len(floats) > 1:
        where = (
            "autocast did not cover this op"
            if entry.get("autocast")
            else "outside autocast PyTorch does not convert them for you"
        )
        return (
            f"its inputs mix {' and '.join(floats)}, and {where} "
            "(run it under torch.autocast, or cast with .to(dtype))"
        )
    return None


# -- JSON hygiene --------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Copy into dict/list/str/int/float/bool/None only, with non-finite floats as strings."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def _trim(report: dict[str, Any]) -> dict[str, Any]:
    """Keep the JSON under MAX_REPORT_BYTES by dropping trace rows from the end."""
    size = len(json.dumps(report))
    if size <= MAX_REPORT_BYTES:
        return report
    for key, flag in (
        ("ops", "ops_truncated"),
        ("scaler", "scaler_truncated"),
        ("hazards", "hazards_truncated"),
    ):
        rows = report[key]
        while rows and size > MAX_REPORT_BYTES:
            size -= len(json.dumps(rows.pop())) + 2
            report[flag] = True
    return report


# -- summary -------------------------------------------------------------------------------------


def _line(value: Any) -> str:
    return f" on line {value}" if value is not None else ""


def _g(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def summarize(report: dict[str, Any]) -> list[str]:
    """One to four plain sentences, most important first: errors, misuse, hazards, then dtypes."""
    out: list[str] = []
    ops = report.get("ops", [])
    events = report.get("scaler", [])
    error = report.get("error")

    if error:
        if error.get("explanation") and error.get("source", "").startswith(
            ("scaler.", "GradScaler")
        ):
            where = f"On line {error['line']}, " if error.get("line") is not None else ""
            text = error["explanation"]
            out.append(where + (text if where else text[0].upper() + text[1:]) + ".")
        elif error.get("explanation") and error.get("source"):
            out.append(
                f"{error['source']}{_line(error.get('line'))} raised {error['type']} because "
                f"{error['explanation']}."
            )
        else:
            msg = f": {error['message']}" if error.get("message") else ""
            out.append(f"The snippet raised {error['type']}{_line(error.get('line'))}{msg}.")

    for ev in events:
        if ev.get("event") == "misuse":
            out.append(_sentence(ev["message"]))
            break

    seen_kinds: set[str] = set()
    for hz in report.get("hazards", []):
        if hz["kind"] not in seen_kinds and len(seen_kinds) < 2:
            seen_kinds.add(hz["kind"])
            out.append(_sentence(hz["message"]))

    skip = _scaler_skip_sentence(events)
    if skip:
        out.append(skip)

    cast = next((o for o in ops if o["reason"].startswith("cast to")), None)
    if cast is not None:
        ac = cast["autocast"] or {}
        froms = sorted({c["from"] for c in cast["casts"]}) or ["float32"]
        out.append(
            f"{cast['name']}{_line(cast['line'])} ran in {cast['output']['dtype']} because autocast "
            f"({ac.get('device_type')}, {ac.get('dtype')}) cast its {' and '.join(froms)} inputs."
        )
    fp32 = next((o for o in ops if o["reason"].startswith("run in float32")), None)
    if fp32 is not None:
        out.append(
            f"{fp32['name']}{_line(fp32['line'])} returned float32: it is on autocast's float32 "
            "list, so autocast ran it in float32."
        )
    other = next((o for o in ops if o["reason"].startswith("autocast is on for")), None)
    if other is not None:
        out.append(
            f"{other['name']}{_line(other['line'])} ran on {other['inputs'][0]['device']} tensors "
            f"while autocast was on for another device, so autocast did not change it."
        )
    steady = _scaler_steady_sentence(events)
    if steady:
        out.append(steady)
    if cast is None and fp32 is None and other is None and len(out) < 2:
        plain = _plain_sentence(ops)
        if plain:
            out.append(plain)
    if not out:
        if ops:
            out.append(f"The snippet ran {report.get('calls_total', len(ops))} traced torch calls.")
        else:
            out.append("The snippet ran no torch operation that could be traced.")
    return out[:MAX_SENTENCES]


def _plain_sentence(ops: list[dict[str, Any]]) -> str | None:
    """What the first op on tensors did when autocast played no part (created tensors aside)."""
    candidates = [
        o
        for o in ops
        if o["output"]
        and not o.get("error")
        and any(not i["dtype"].startswith("python") for i in o["inputs"])
    ]
    if not candidates:
        return None
    promoted = [o for o in candidates if "promoted" in o["reason"]]
    o = (promoted or candidates)[0]
    where = f"{o['name']}{_line(o['line'])}"
    dt = o["output"]["dtype"]
    if o["reason"].startswith("explicit cast"):
        return f"{where} converted its input to {dt} explicitly; no autocast was involved."
    if "promoted" in o["reason"]:
        return f"{where} ran outside autocast and returned {dt}, the widest of its inputs' dtypes."
    if o["reason"].startswith("outside autocast"):
        return f"{where} ran outside autocast, so its output kept its inputs' dtype ({dt})."
    return f"{where} returned {dt} ({o['reason']})."


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


def _scaler_skip_sentence(events: list[dict[str, Any]]) -> str | None:
    skipped = [e for e in events if e.get("event") == "step" and e.get("taken") is False]
    if not skipped:
        return None
    n = sum(e.get("count", 1) for e in skipped)
    updates = [e for e in events if e.get("event") == "update" and e.get("change") != "unchanged"]
    lowered = [e for e in updates if (e.get("new_scale") or 0) < (e.get("old_scale") or 0)]
    what = (
        f"skipped the optimizer step{_line(skipped[0].get('line'))}"
        if n == 1
        else f"skipped {n} optimizer steps{_line(skipped[0].get('line'))}"
    )
    text = f"GradScaler {what} because the gradients held inf/NaN"
    if lowered:
        first, last = lowered[0], lowered[-1]
        verb = (
            "halved"
            if len(lowered) == 1 and first.get("count", 1) == 1 and first.get("change") == "halved"
            else "lowered"
        )
        text += (
            f", and update() {verb} the scale from {_g(first.get('old_scale'))} to "
            f"{_g(last.get('new_scale'))}"
        )
    return text + "."


def _scaler_steady_sentence(events: list[dict[str, Any]]) -> str | None:
    disabled = next((e for e in events if e.get("enabled") is False), None)
    if disabled is not None:
        return (
            f"GradScaler{_line(disabled.get('line'))} was disabled (for example "
            'GradScaler("cuda") on a machine without CUDA), so it neither scaled the loss nor '
            "checked the gradients."
        )
    steps = [e for e in events if e.get("event") == "step" and e.get("taken") is True]
    if not steps or any(e.get("event") == "step" and e.get("taken") is False for e in events):
        return None
    n = sum(e.get("count", 1) for e in steps)
    scale = next((e.get("scale") for e in events if e.get("event") == "scale"), None)
    scaled = f"multiplied the loss by {_g(scale)} and " if scale is not None else ""
    took = "took the optimizer step" if n == 1 else f"took all {n} optimizer steps"
    return (
        f"GradScaler {scaled}{took}{_line(steps[0].get('line'))}: no inf/NaN gradients were found."
    )
