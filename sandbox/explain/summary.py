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
    explained = (error.get("explanation") if error else None) or ""
    for hz in report.get("hazards", []):
        if hz["kind"] == "cast_dtype" and "weight cache" in explained:
            continue  # the error's own sentence already names the cache
        if hz["kind"] not in seen_kinds and len(seen_kinds) < 2:
            seen_kinds.add(hz["kind"])
            out.append(_sentence(hz["message"]))

    out.extend(_scaler_skip_sentences(events))
    out.extend(_mechanism_sentences(ops, report.get("hazards", [])))

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
            narrowed = _kept_by_writing_in_place(ops)
            if narrowed and narrowed not in out:
                out.append(narrowed)
    if not out:
        if ops:
            out.append(f"The snippet ran {report.get('calls_total', len(ops))} traced torch calls.")
        else:
            out.append("The snippet ran no torch operation that could be traced.")
    return out[:MAX_SENTENCES]


_REGION_ORDER = ("compiled", "custom_fwd_cast", "recompute", "custom_bwd", "custom_fwd", "backward")


def _mechanism_sentences(ops: list[OpRecord], hazards: list[Any]) -> list[str]:
    """At most two rows whose dtype a mechanism besides plain autocast explains, in their own
    words (the row's reason names it): a torch.compile graph, custom_fwd's casts, checkpoint's
    recomputation, a custom_bwd backward; or a call handed autocast's cached casts when no
    hazard already says so."""
    out: list[str] = []
    for kind in _REGION_ORDER:
        rows = [o for o in ops if _region_kind(o) == kind and o["output"]]
        changed = [o for o in rows if o["casts"] or _out_dtype(o) in ("float16", "bfloat16")]
        if rows and len(out) < 2:
            o = (changed or rows)[0]
            out.append(f"{o['name']}{_line(o['line'])}: {o['reason']}.")
    cached = {h.get("line") for h in hazards if h.get("kind") in ("stale_cast", "cast_dtype")}
    reused = next((o for o in ops if o.get("reused") and o["line"] not in cached), None)
    if reused is not None and len(out) < 2:
        out.append(f"{reused['name']}{_line(reused['line'])}: {reused['reason']}.")
    return out


def _region_kind(op: OpRecord) -> str | None:
    region = op.get("region")
    return region["kind"] if region else None


def _plain_sentence(ops: list[OpRecord]) -> str | None:
    """What the first op on tensors did when autocast played no part (created tensors aside)."""
    candidates = [
        o
        for o in ops
        if o["output"]
        and not o.get("error")
        and not o.get("region")
        and any(not i["dtype"].startswith("python") for i in o["inputs"])
    ]
    if not candidates:
        return None
    # What changed a dtype says more than what kept one: a promotion, then an explicit cast (a
    # `.half()` came second to the `reshape` before it, which only followed its input).
    promoted = [o for o in candidates if "promoted to the widest" in o["reason"]]
    explicit = [o for o in candidates if o["reason"].startswith("explicit cast")]
    o = (promoted or explicit or candidates)[0]
    where = f"{o['name']}{_line(o['line'])}"
    dt = _out_dtype(o)
    if o["reason"].startswith("explicit cast"):
        return f"{where} converted its input to {dt} explicitly; no autocast was involved."
    if "promoted to the widest" in o["reason"]:
        return f"{where} ran outside autocast and returned {dt}, the widest of its inputs' dtypes."
    if o["reason"].startswith("wrote into"):
        return f"{where} {o['reason'].split(';')[0]}."
    if o["reason"].startswith("outside autocast"):
        return f"{where} ran outside autocast, so its output kept its inputs' dtype ({dt})."
    return f"{where} returned {dt} ({o['reason']})."


def _kept_by_writing_in_place(ops: list[OpRecord]) -> str | None:
    """An in-place op whose result kept a dtype narrower than its widest input: the contrast with
    promotion out of place (`acc + step` is float32, `acc.add_(step)` stays bfloat16)."""
    for o in ops:
        if o["reason"].startswith("wrote into") and "were converted to it" in o["reason"]:
            return f"{o['name']}{_line(o['line'])} {o['reason'].split(';')[0]}."
    return None


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


def _lowered(events: list[ScalerEvent]) -> str:
    """ ", and update() halved the scale from A to B" when an update lowered it, else ""."""
    updates = [e for e in events if e.get("event") == "update" and e.get("change") != "unchanged"]
    # float(): a non-finite scale is "inf" or "nan" in the plain report, which `<` cannot compare.
    lowered = [
        e for e in updates if float(e.get("new_scale") or 0) < float(e.get("old_scale") or 0)
    ]
    if not lowered:
        return ""
    first, last = lowered[0], lowered[-1]
    verb = (
        "halved"
        if len(lowered) == 1 and first.get("count", 1) == 1 and first.get("change") == "halved"
        else "lowered"
    )
    return (
        f", and update() {verb} the scale from {_g(first.get('old_scale'))} to "
        f"{_g(last.get('new_scale'))}"
    )


def _scaler_skip_sentences(events: list[ScalerEvent]) -> list[str]:
    """Steps GradScaler skipped, and steps it left to an optimizer that unscales by itself."""
    steps = [e for e in events if e.get("event") == "step"]
    skipped = [e for e in steps if e.get("taken") is False]
    inside = [e for e in steps if e.get("in_optimizer") and e.get("found_inf")]
    out = []
    if skipped:
        n = sum(e.get("count", 1) for e in skipped)
        what = (
            f"skipped the optimizer step{_line(skipped[0].get('line'))}"
            if n == 1
            else f"skipped {n} optimizer steps{_line(skipped[0].get('line'))}"
        )
        out.append(f"GradScaler {what} because the gradients held inf/NaN{_lowered(events)}.")
    if inside:
        out.append(_in_optimizer_sentence(inside) + ("" if skipped else _lowered(events)) + ".")
    return out


def _in_optimizer_sentence(inside: list[ScalerEvent]) -> str:
    """Steps of an optimizer that unscales by itself (`fused=True`), called with found_inf set:
    GradScaler did not skip them; the optimizer skipped its own update."""
    first = inside[0]
    n = sum(e.get("count", 1) for e in inside)
    which = "its step()" if n == 1 else f"its step() {n} times"
    text = (
        f"GradScaler found inf/NaN gradients{_line(first.get('line'))} but did not skip the "
        "step: the optimizer unscales by itself (as fused=True ones do), so scaler.step called "
        f"{which} with found_inf set"
    )
    created = sum(e.get("state_created", 0) * e.get("count", 1) for e in inside)
    if all(e.get("unchanged") is True for e in inside):
        text += ", and that step left the parameters and the optimizer's moments unchanged"
        if created:
            params = "parameter" if created == 1 else "parameters"
            text += f" but created optimizer state for {created} {params}"
    elif any(e.get("unchanged") is False for e in inside):
        text += ", and that step changed the parameters or the optimizer's state"
    else:
        text += " for it to skip its own update (too large to compare before and after)"
    return text


def _scaler_steady_sentence(events: list[ScalerEvent]) -> str | None:
    disabled = next((e for e in events if e.get("enabled") is False), None)
    if disabled is not None:
        return (
            f"GradScaler{_line(disabled.get('line'))} was disabled (for example "
            'GradScaler("cuda") on a machine without CUDA), so it neither scaled the loss nor '
            "checked the gradients."
        )
    steps = [e for e in events if e.get("event") == "step"]
    if not steps or any(e.get("taken") is False or e.get("found_inf") for e in steps):
        return None
    n = sum(e.get("count", 1) for e in steps)
    unscaled = sum(e.get("count", 1) for e in steps if e.get("unscaled_loss"))
    scale = next((e.get("scale") for e in events if e.get("event") == "scale"), None)
    took = "took the optimizer step" if n == 1 else f"took all {n} optimizer steps"
    where = _line(steps[0].get("line"))
    if unscaled:
        # counted from what happened: a step after backward() of an unscaled loss is no scaled step
        scaled = n - unscaled
        return (
            f"GradScaler {took}{where} with no inf/NaN gradients found, but only {scaled} of "
            f"them followed a loss it had multiplied by {_g(scale)}: {unscaled} used gradients "
            "of an unscaled loss."
        )
    scaled_by = f"multiplied the loss by {_g(scale)} and " if scale is not None else ""
    return f"GradScaler {scaled_by}{took}{where}: no inf/NaN gradients were found."
