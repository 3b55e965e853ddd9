"""A run's explanation in words for the pages (Jinja filters): a tensor, an autocast region, a
cast, a reused cached cast, a GradScaler event. Explanations come from another process and may lack
keys: every filter takes what it gets."""

from __future__ import annotations

from typing import Any

from app.explain_text import step_text


def tensor_desc(meta: Any) -> str:
    """`float32 [1, 4]` (plus the device when it is not the CPU) from an op trace's tensor record."""
    if not isinstance(meta, dict):
        return "—" if meta is None else str(meta)
    dtype = str(meta.get("dtype") or "?")
    shape = meta.get("shape")
    text = dtype
    if isinstance(shape, (list, tuple)):
        text += " [" + ", ".join(str(s) for s in shape) + "]" if shape else " scalar"
    device = meta.get("device")
    if device and device != "cpu":
        text += f" on {device}"
    return text


def autocast_desc(meta: Any) -> str:
    if not isinstance(meta, dict):
        return "off"
    return f"{meta.get('device_type', '?')}, {meta.get('dtype', '?')}"


def cast_desc(cast: Any) -> str:
    if not isinstance(cast, dict):
        return str(cast)
    shape = cast.get("shape")
    dims = (
        f" [{', '.join(str(s) for s in shape)}]"
        if isinstance(shape, (list, tuple)) and shape
        else ""
    )
    return f"{cast.get('from', '?')} → {cast.get('to', '?')}{dims}"


def reused_desc(reused: Any) -> str:
    """A cast autocast's weight cache handed a call: `float32 → bfloat16 [4, 8] made on line 9,
    reused from autocast's cache`."""
    if not isinstance(reused, dict):
        return str(reused)
    shape = reused.get("shape")
    dims = (
        f" [{', '.join(str(s) for s in shape)}]"
        if isinstance(shape, (list, tuple)) and shape
        else ""
    )
    line = reused.get("line")
    made = f" made on line {line}," if line is not None else ""
    # The page puts "cast " before each item of a row's casts: autocast caches float32 weights.
    return f"float32 → {reused.get('dtype', '?')}{dims}{made} reused from autocast's cache"


_REGION_LABELS = {
    "compiled": "compiled graph",
    "custom_fwd": "custom_fwd",
    "custom_fwd_cast": "custom_fwd cast",
    "custom_bwd": "custom_bwd",
    "recompute": "recomputed",
    "backward": "in backward",
}


def region_label(region: Any) -> str:
    """A short label for what a traced call ran inside (`Region.kind`); the reason says the rest."""
    kind = region.get("kind") if isinstance(region, dict) else None
    return _REGION_LABELS.get(str(kind), str(kind or ""))


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def scaler_desc(event: Any) -> str:
    """One GradScaler event in words: what a learner needs to read from it."""
    if not isinstance(event, dict):
        return str(event)
    kind = event.get("event")
    if kind == "scale":
        return f"loss multiplied by {_num(event.get('scale', '?'))}"
    if kind == "unscale_":
        how = "explicit unscale_() call" if event.get("explicit") else "inside step()"
        return f"gradients divided by the scale ({how})"
    if kind == "inf_check":
        return (
            "inf/NaN found in the gradients" if event.get("found_inf") else "gradients all finite"
        )
    if kind == "step":
        if event.get("in_optimizer") or event.get("unscaled_loss"):
            return step_text(event)
        return (
            "optimizer.step() ran"
            if event.get("taken")
            else "optimizer.step() SKIPPED (inf/NaN gradients)"
        )
    if kind == "error":
        call = event.get("call")
        return (
            f"{call}() raised {event.get('error', 'an error')}"
            if call
            else str(event.get("error", "an error"))
        )
    if kind == "misuse":
        return str(event.get("message") or "misused")
    if kind == "update":
        old, new = event.get("old_scale"), event.get("new_scale")
        change = event.get("change")
        text = (
            f"scale {_num(old)} → {_num(new)}"
            if old is not None and new is not None
            else "scale updated"
        )
        return f"{text} ({change})" if change else text
    rest = {k: v for k, v in event.items() if k not in ("event", "line", "count")}
    return ", ".join(f"{k}={_num(v)}" for k, v in rest.items()) or str(kind)
