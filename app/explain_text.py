"""Plain-text rendering of a `sandbox.explain` report for the terminal (`ampquiz run --explain`).

It takes the report as a dict (what came back from the sandbox as JSON) and imports nothing from
`sandbox`, so it works on any report, including one from an older or newer sandbox.
"""

from __future__ import annotations

from typing import Any

_COLUMNS = ("line", "op", "inputs", "output", "autocast", "casts", "reason", "calls")
_MAX_WIDTH = {"op": 32, "inputs": 30, "output": 20, "autocast": 14, "casts": 22, "reason": 48}


def _clip(text: str, width: int | None) -> str:
    if width is None or len(text) <= width:
        return text
    return text[: width - 1] + "…"


def _shape(shape: Any) -> str:
    if not isinstance(shape, list):
        return ""
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _op_row(op: dict[str, Any]) -> dict[str, str]:
    inputs = ", ".join(str(i.get("dtype", "?")) for i in op.get("inputs") or [])
    if op.get("inputs_total"):
        inputs += f", … ({op['inputs_total']} in all)"
    out = op.get("output")
    output = f"{out.get('dtype')} {_shape(out.get('shape'))}".strip() if out else "-"
    ac = op.get("autocast")
    autocast = f"{ac.get('device_type')}/{ac.get('dtype')}" if ac else "off"
    casts = op.get("casts") or []
    if casts:
        kinds: dict[str, int] = {}
        for c in casts:
            key = f"{c.get('from')}→{c.get('to')}"
            kinds[key] = kinds.get(key, 0) + 1
        total = op.get("casts_total", len(casts))
        extra = total - len(casts)
        cast_text = ", ".join(f"{n}× {k}" for k, n in kinds.items())
        if extra > 0:
            cast_text += f" (+{extra})"
    else:
        cast_text = "-"
    count = op.get("count", 1) or 1
    return {
        "line": "" if op.get("line") is None else str(op["line"]),
        "op": str(op.get("name", "?")),
        "inputs": inputs or "-",
        "output": output,
        "autocast": autocast,
        "casts": cast_text,
        "reason": str(op.get("reason", "")),
        "calls": f"× {count}" if count > 1 else "",
    }


def _table(rows: list[dict[str, str]]) -> list[str]:
    """Columns padded to their widest (clipped) cell; the last column is left ragged."""
    header = {c: c for c in _COLUMNS}
    clipped = [{c: _clip(r[c], _MAX_WIDTH.get(c)) for c in _COLUMNS} for r in rows]
    widths = {c: max(len(r[c]) for r in [header, *clipped]) for c in _COLUMNS}

    def fmt(r: dict[str, str]) -> str:
        return "  ".join(r[c].ljust(widths[c]) for c in _COLUMNS).rstrip()

    rule = "  ".join("-" * widths[c] for c in _COLUMNS)
    return [fmt(header), rule, *(fmt(r) for r in clipped)]


def _scaler_line(ev: dict[str, Any]) -> str:
    kind = str(ev.get("event", "?"))
    where = f"line {ev['line']}" if ev.get("line") is not None else "line ?"
    if kind == "scale":
        text = (
            "disabled (no scaling)"
            if ev.get("enabled") is False
            else f"scale={_num(ev.get('scale'))}"
        )
    elif kind == "unscale_":
        text = "explicit call" if ev.get("explicit") else "inside step()"
    elif kind == "inf_check":
        text = "found inf/NaN" if ev.get("found_inf") else "no inf/NaN"
    elif kind == "step":
        if ev.get("enabled") is False:
            text = "scaler disabled: plain optimizer.step()"
        else:
            text = "taken" if ev.get("taken") else "SKIPPED (inf/NaN gradients)"
    elif kind == "update":
        text = (
            f"{_num(ev.get('old_scale'))} → {_num(ev.get('new_scale'))} ({ev.get('change', '')})"
        ).strip()
    elif kind in ("misuse", "error"):
        text = str(ev.get("message", ""))
    else:
        text = ", ".join(f"{k}={v}" for k, v in ev.items() if k not in ("event", "line", "count"))
    count = ev.get("count", 1) or 1
    times = f"  × {count}" if count > 1 else ""
    return f"  {where:<8}  {kind:<9}  {text}{times}"


def format_explanation(report: dict[str, Any]) -> str:
    """Summary, op table, GradScaler events and hazards, as aligned plain text."""
    out: list[str] = []
    summary = report.get("summary") or []
    if summary:
        out.append("What happened")
        out.extend(f"  {s}" for s in summary)

    ops = report.get("ops") or []
    if ops:
        out.append("")
        total = report.get("ops_total", len(ops))
        note = (
            f" (first {len(ops)} of {total} distinct calls)" if report.get("ops_truncated") else ""
        )
        out.append(f"Ops{note}")
        out.extend("  " + line for line in _table([_op_row(op) for op in ops]))

    events = report.get("scaler") or []
    if events:
        out.append("")
        out.append("GradScaler" + (" (truncated)" if report.get("scaler_truncated") else ""))
        out.extend(_scaler_line(ev) for ev in events)

    hazards = report.get("hazards") or []
    if hazards:
        out.append("")
        out.append("Hazards" + (" (truncated)" if report.get("hazards_truncated") else ""))
        for hz in hazards:
            where = f"line {hz['line']}" if hz.get("line") is not None else "line ?"
            count = hz.get("count", 1) or 1
            times = f"  × {count}" if count > 1 else ""
            out.append(f"  {where:<8}  {hz.get('kind', '?')!s:<10}  {hz.get('message', '')}{times}")

    if not out:
        out.append("Nothing to explain: no torch operation was traced.")
    return "\n".join(out) + "\n"
