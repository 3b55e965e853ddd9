"""Plain-text rendering of a `sandbox.explain` report for the terminal (`ampquiz run --explain`).

It takes the report as a dict (what came back from the sandbox as JSON) and imports nothing from
`sandbox`, so it works on any report, including one from an older or newer sandbox.
"""

from __future__ import annotations

from typing import Any

_FINDINGS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("Disabling autocast",),
     "Autocast was disabled{where}: {message} So nothing in its region ran in lower precision."),
    (("GradScaler is enabled, but CUDA is not available",),
     ("The GradScaler was disabled{where}: CUDA is not available, so scale() returns the loss "
      "unchanged and step() is a plain optimizer.step().")),
    (("User provided device_type of",),
     "Autocast was disabled{where}: {message}"),
)  # fmt: skip
"""Warnings that change what the snippet means, with the sentence that says so: they lead the
summary, ahead of counts, instead of sitting among the warnings."""


def lead_findings(warnings: list[Any]) -> list[str]:
    """The most important findings a run's warnings carry (a disabled autocast or GradScaler),
    as sentences, at most one of each kind, in the order they happened."""
    out: list[str] = []
    for w in warnings or []:
        message = str(
            (w.get("message") if isinstance(w, dict) else getattr(w, "message", "")) or ""
        )
        line = w.get("line") if isinstance(w, dict) else getattr(w, "line", None)
        for needles, sentence in _FINDINGS:
            if any(n in message for n in needles):
                where = f" (line {line})" if line else ""
                text = sentence.format(where=where, message=message.strip().rstrip(".") + ".")
                if text not in out:
                    out.append(text)
                break
    return out


def what_happened(run: dict[str, Any]) -> list[str]:
    """The summary a learner reads first: findings from the warnings, then the explanation's own
    sentences (the most important first), without repeats."""
    explanation = run.get("explanation")
    if not isinstance(explanation, dict):
        explanation = {}
    summary = [str(x) for x in (explanation.get("summary") or []) if isinstance(x, str)]
    lead = lead_findings(run.get("warnings") or [])
    return lead + [x for x in summary if x not in lead]


_COLUMNS = ("line", "op", "inputs", "output", "autocast", "casts", "reason", "calls")
_MAX_WIDTH = {"op": 32, "inputs": 30, "output": 20, "autocast": 14, "casts": 44}
_MIN_REASON = 48
"""The "why" column takes what the terminal leaves; at least this much (it wraps on a narrow one)."""


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
    reused = [r for r in op.get("reused") or [] if isinstance(r, dict)]
    if reused:
        lines = sorted({str(r.get("line")) for r in reused if r.get("line") is not None})
        made = f" (line {', '.join(lines)})" if lines else ""
        text = f"{len(reused)}× cached{made}"
        cast_text = text if cast_text == "-" else f"{cast_text}, {text}"
    count = op.get("count", 1) or 1
    region = op.get("region")
    compiled = isinstance(region, dict) and region.get("kind") == "compiled"
    return {
        "line": "" if op.get("line") is None else str(op["line"]),
        "op": str(op.get("name", "?")),
        "inputs": inputs or "-",
        "output": output,
        "autocast": autocast,
        "casts": cast_text,
        "reason": str(op.get("reason", "")),
        "calls": (("graph" if compiled else "") + (f" × {count}" if count > 1 else "")).strip(),
    }


def _table(rows: list[dict[str, str]], columns: int | None) -> list[str]:
    """Columns padded to their widest (clipped) cell. The "why" column gets the width the
    terminal has left (`columns`; None: no limit); the last column is left ragged."""
    header = {c: c for c in _COLUMNS}
    clipped = [{c: _clip(r[c], _MAX_WIDTH.get(c)) for c in _COLUMNS if c != "reason"} for r in rows]
    others = [c for c in _COLUMNS if c != "reason"]
    used = 2 + sum(max(len(r[c]) for r in [header, *clipped]) + 2 for c in others)
    room = None if columns is None else max(_MIN_REASON, columns - used)
    for row, full in zip(clipped, rows):
        row["reason"] = _clip(full["reason"], room)
    widths = {c: max(len(r[c]) for r in [header, *clipped]) for c in _COLUMNS}

    def fmt(r: dict[str, str]) -> str:
        return "  ".join(r[c].ljust(widths[c]) for c in _COLUMNS).rstrip()

    rule = "  ".join("-" * widths[c] for c in _COLUMNS)
    return [fmt(header), rule, *(fmt(r) for r in clipped)]


def step_text(ev: dict[str, Any]) -> str:
    """A GradScaler step event in words (the web's run page says the same)."""
    if ev.get("enabled") is False:
        return "scaler disabled: plain optimizer.step()"
    if ev.get("in_optimizer"):
        if not ev.get("found_inf"):
            return "taken (the optimizer unscaled the gradients itself)"
        text = "optimizer.step() called with found_inf set"
        if ev.get("unchanged") is True:
            created = ev.get("state_created") or 0
            made = f"; state created for {created}" if created else ""
            text += f": the optimizer skipped its update (parameters and moments unchanged{made})"
        elif ev.get("unchanged") is False:
            text += ", yet the parameters or the optimizer's state changed"
        else:
            text += ": the optimizer skips its own update"
        return text
    text = "taken" if ev.get("taken") else "SKIPPED (inf/NaN gradients)"
    if ev.get("unscaled_loss"):
        text += " (its gradients came from an unscaled loss)"
    return text


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
        text = step_text(ev)
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


def format_explanation(
    report: dict[str, Any], columns: int | None = None, lead: list[str] | None = None
) -> str:
    """Summary, op table, GradScaler events and hazards, as aligned plain text, fitted to a
    terminal `columns` wide (None: nothing clipped in the "why" column). `lead`: findings that go
    before the summary (see `lead_findings`)."""
    out: list[str] = []
    summary = [*(lead or []), *[x for x in (report.get("summary") or []) if x not in (lead or [])]]
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
        out.extend("  " + line for line in _table([_op_row(op) for op in ops], columns))

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
