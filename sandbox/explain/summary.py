"""The explanation's summary: one to four plain sentences, most important first.

Runs in: the runner, on the finished report (the wording only; what was observed comes from the
tracer, the GradScaler monitor and the hazard checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox.explain.report import OpRecord, Report, ScalerEvent

MAX_SENTENCES = 4


def _line(value: Any) -> str:
    return f" on line {value}" if value is not None else ""


def _g(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def summarize(report: Report) -> list[str]:
    """One to four plain sentences, most important first: errors, misuse, hazards, then dtypes."""
    out: list[str] = []
    ops = report.get("ops", [])
    events = report.get("scaler", [])
    error = report.get("error")

    if error:
        text = error.get("explanation")
        # `_error` in explainer.py sets a source with every explanation.
        if text and (error.get("source") or "").startswith(("scaler.", "GradScaler")):
            where = f"On line {error['line']}, " if error.get("line") is not None else ""
            out.append(where + (text if where else text[0].upper() + text[1:]) + ".")
        elif text and error.get("source"):
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
        ac: Mapping[str, object] = cast["autocast"] or {}
        froms = sorted({c["from"] for c in cast["casts"]}) or ["float32"]
        out.append(
            f"{cast['name']}{_line(cast['line'])} ran in {_out_dtype(cast)} because autocast "
            f"({ac.get('device_type')}, {ac.get('dtype')}) cast its {' and '.join(froms)} inputs."
        )
    contrast = _without_autocast(ops, cast) if cast is not None else None
    if contrast is not None:
        out.append(contrast)
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


def _plain_sentence(ops: list[OpRecord]) -> str | None:
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
    # What changed a dtype says more than what kept one: a promotion, then an explicit cast (a
    # `.half()` came second to the `reshape` before it, which only followed its input).
    promoted = [o for o in candidates if "promoted" in o["reason"]]
    explicit = [o for o in candidates if o["reason"].startswith("explicit cast")]
    o = (promoted or explicit or candidates)[0]
    where = f"{o['name']}{_line(o['line'])}"
    dt = _out_dtype(o)
    if o["reason"].startswith("explicit cast"):
        return f"{where} converted its input to {dt} explicitly; no autocast was involved."
    if "promoted" in o["reason"]:
        return f"{where} ran outside autocast and returned {dt}, the widest of its inputs' dtypes."
    if o["reason"].startswith("outside autocast"):
        return f"{where} ran outside autocast, so its output kept its inputs' dtype ({dt})."
    return f"{where} returned {dt} ({o['reason']})."


def _without_autocast(ops: list[OpRecord], cast: OpRecord) -> str | None:
    """The same op as `cast`, run where autocast was off (after its region, or in a nested
    `autocast(enabled=False)`) and so in another dtype: the contrast a snippet is usually written
    to show, which the summary's first sentence alone left out."""
    dt = _out_dtype(cast)
    o = next((o for o in ops if o["name"] == cast["name"] and o["reason"].startswith("outside autocast")
              and o["output"] and o["output"]["dtype"] != dt and o["line"] is not None), None)  # fmt: skip
    if o is None:
        return None
    return (
        f"{o['name']}{_line(o['line'])} ran with autocast off, so it returned {_out_dtype(o)}, "
        f"its inputs' dtype, where under autocast{_line(cast['line'])} it returned {dt}."
    )


def _out_dtype(op: OpRecord) -> str:
    """The dtype `op` returned. Every op the sentences name returned a tensor: `reason_for` gives
    the reasons they look for only to those, and `_plain_sentence` keeps only those."""
    output = op["output"]
    assert output is not None, op["reason"]
    return output["dtype"]


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


def _scaler_skip_sentence(events: list[ScalerEvent]) -> str | None:
    skipped = [e for e in events if e.get("event") == "step" and e.get("taken") is False]
    if not skipped:
        return None
    n = sum(e.get("count", 1) for e in skipped)
    updates = [e for e in events if e.get("event") == "update" and e.get("change") != "unchanged"]
    # float(): a non-finite scale is "inf" or "nan" in the plain report, which `<` cannot compare.
    lowered = [
        e for e in updates if float(e.get("new_scale") or 0) < float(e.get("old_scale") or 0)
    ]
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


def _scaler_steady_sentence(events: list[ScalerEvent]) -> str | None:
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
