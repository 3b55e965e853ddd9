"""The Explainer: installs the op trace, the GradScaler monitor and the hazard checks around one
snippet run, then builds the report from what they saw.

Runs in: the runner. Usage::

    explainer = Explainer(filename="<snippet>", max_ops=200)
    with explainer:                      # installs tracing; never swallows exceptions
        exec(compile(code, "<snippet>", "exec"), globs)
    report = explainer.report(exception=exc_or_None)   # JSON-serialisable dict

Nothing is installed until `with explainer:`; everything is removed on exit. The report is bounded
(ops are folded per line and signature and capped; see `MAX_REPORT_BYTES`), so a long training loop
stays small. The report's shape is declared in `sandbox.explain.report`; its sentences are
written by `sandbox.explain.summary`. Only torch and the standard library are imported.
"""

from __future__ import annotations

import json
import math
from types import TracebackType
from typing import Any, Literal, Self

from sandbox.explain.cast_cache import CastCache
from sandbox.explain.compiled import CompiledGraphs
from sandbox.explain.hazards import HazardChecker
from sandbox.explain.ops import OpTracer
from sandbox.explain.report import OpRecord, Report, SnippetException
from sandbox.explain.scaler import ScalerMonitor
from sandbox.explain.scaler_errors import explain_scaler_error
from sandbox.explain.summary import summarize
from sandbox.frames import SNIPPET, snippet_line, traceback_line

__all__ = ["MAX_REPORT_BYTES", "Explainer", "failed_report"]

MAX_REPORT_BYTES = 48_000
"""JSON size the report is trimmed to (ops are dropped from the end first)."""


class Explainer:
    """Context manager that traces one snippet run and then describes it with `report()`."""

    def __init__(self, filename: str = SNIPPET, max_ops: int = 200) -> None:
        self.filename = filename
        self.max_ops = max(1, int(max_ops))
        self._tracer: OpTracer | None = None
        self._hazards: HazardChecker | None = None
        self._scaler: ScalerMonitor | None = None
        self._exit_exc: BaseException | None = None
        self._hook: Any = None
        self._compiled: CompiledGraphs | None = None

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
        tracer.grads = scaler.grads
        tracer.cache = CastCache(filename, hazards.add, tracer.pause)
        self._tracer, self._hazards, self._scaler = tracer, hazards, scaler
        scaler.install()
        self._compiled = CompiledGraphs(tracer)
        try:
            self._hook = tracer.cache.install()
            self._compiled.install()
            tracer.install()
        except BaseException:
            self._compiled.uninstall()
            self._remove_hook()
            scaler.uninstall()
            raise
        return self

    def _remove_hook(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self._tracer is not None:
            self._tracer.uninstall()
        if self._scaler is not None:
            self._scaler.uninstall()
        self._remove_hook()
        if self._compiled is not None:
            self._compiled.uninstall()
        self._exit_exc = exc
        return False

    # -- the report ---------------------------------------------------------------------------

    def report(self, exception: BaseException | None = None) -> Report:
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
        plain: Report = _plain(report)
        plain["summary"] = summarize(plain)
        return _trim(plain)

    def _error(
        self, exc: BaseException, tracer: OpTracer, scaler: ScalerMonitor
    ) -> SnippetException:
        """What went wrong, tied to the snippet line and, when possible, to a traced call."""
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        info: SnippetException = {
            "type": type(exc).__name__,
            "message": first[:300],
            "line": traceback_line(exc, self.filename),
            "explanation": None,
            "source": None,
        }
        event = scaler.error_for(exc)
        if event is not None:
            info["explanation"] = event["message"]
            info["source"] = f"scaler.{event['call']}()"
            if event.get("line") is not None:
                info["line"] = event["line"]
            return info
        text = explain_scaler_error(exc)
        if text is not None:
            info["explanation"] = text
            info["source"] = "GradScaler"
            return info
        if tracer.last_failed is not None and tracer.last_failed[0] is exc:
            entry = tracer.last_failed[1]
            info["source"] = entry["name"]
            info["line"] = entry["line"]
            info["explanation"] = _op_error_hint(entry, first)
        return info


_DTYPE_WORDS = ("dtype", "scalar type", "Half", "BFloat16", "Float", "Double")
"""torch's messages for a dtype mismatch name dtypes; a shape error with mixed inputs does not."""


def _op_error_hint(entry: OpRecord, message: str) -> str | None:
    """Why a traced op failed, when the inputs' dtypes tell the story, and only when torch's own
    message is about dtypes (mixed inputs that fail on their shapes failed for their shapes)."""
    if not any(word in message for word in _DTYPE_WORDS):
        return None
    autocast = entry.get("autocast")
    region = autocast["dtype"] if autocast else None
    other = [r for r in entry.get("reused", []) if region and r["dtype"] != region]
    if other:
        made = f" on line {other[0]['line']}" if other[0]["line"] is not None else ""
        return (
            f"autocast's weight cache handed it the {other[0]['dtype']} copy of a weight cast"
            f"{made} by an enclosing {other[0]['dtype']} region, while this {region} region cast "
            f"its other inputs to {region}: the cache is keyed on the weight alone, not on the "
            "dtype (cache_enabled=False on the inner region avoids it)"
        )
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


def _trim(report: Report) -> Report:
    """Keep the JSON under MAX_REPORT_BYTES by dropping trace rows from the end."""
    size = len(json.dumps(report))
    if size <= MAX_REPORT_BYTES:
        return report
    for key, flag in (
        ("ops", "ops_truncated"),
        ("scaler", "scaler_truncated"),
        ("hazards", "hazards_truncated"),
    ):
        # mypy reads a TypedDict by literal keys only; these are the tuple's literals above.
        rows: list[Any] = report[key]  # type: ignore[literal-required]
        while rows and size > MAX_REPORT_BYTES:
            size -= len(json.dumps(rows.pop())) + 2
            report[flag] = True  # type: ignore[literal-required]
    return report


def failed_report(exc: BaseException) -> Report:
    """The report of a run whose explanation could not be built: the run itself still stands."""
    try:
        said = repr(exc)[:500]
    except BaseException:  # noqa: BLE001 - the snippet's exception may be what broke it
        said = type(exc).__name__
    summary = [f"The explanation could not be built: {said}"]
    return {"summary": summary, "ops": [], "scaler": [], "hazards": []}
