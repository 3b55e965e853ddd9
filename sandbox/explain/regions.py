"""What a traced call ran inside, besides the autocast state: the frames around the snippet's code.

- `custom_fwd`: the forward of `torch.amp.custom_fwd`; with `cast_inputs` inside an enabled
  region it casts the floating-point inputs (`custom_fwd_cast`: the `.to()` calls of its `_cast`,
  each a row of its own) and runs the forward with autocast off; without it, under autocast as
  the caller left it. Without this, a forward's ops read "outside autocast".
- `custom_bwd`: a backward that `custom_bwd` runs under the autocast state its forward saw.
- `recompute`: `torch.utils.checkpoint` running the forward again during backward, under the
  autocast state it saved from the forward pass (a row of its own, no longer folded into the
  backward row alone).
- `backward`: other snippet code the backward pass ran (a hook, an autograd Function's backward).

All of it is read off the Python stack (torch 2.13's `torch/amp/autocast_mode.py` and
`torch/utils/checkpoint.py`); nothing is installed.

Runs in: the runner (part of the explanation). Only torch and the standard library are imported.
"""

from __future__ import annotations

import os
from types import CodeType, FrameType, FunctionType
from typing import Any, NamedTuple

import torch
import torch.amp.autocast_mode as _amp
import torch.autograd.graph as _graph

from sandbox.explain.report import RegionKind


def _inner(outer: Any, name: str) -> CodeType | None:
    """The code of the function `name` defined inside `outer` (a decorator's wrapper)."""
    code = getattr(outer, "__code__", None)
    for const in code.co_consts if code is not None else ():
        if isinstance(const, CodeType) and const.co_name == name:
            return const
    return None


DECORATE_FWD = _inner(_amp.custom_fwd, "decorate_fwd")
DECORATE_BWD = _inner(_amp.custom_bwd, "decorate_bwd")
CAST_INPUTS = getattr(getattr(_amp, "_cast", None), "__code__", None)
"""The code of `custom_fwd`'s `_cast`, which calls `.to(cast_inputs)` on each input."""

ENGINE_RUN = getattr(getattr(_graph, "_engine_run_backward", None), "__code__", None)
"""Where the autograd engine is entered from Python: a frame walk in backward stops there."""
_CHECKPOINT = os.sep.join(("torch", "utils", "checkpoint.py"))
_RECOMPUTE = frozenset({"recompute_fn", "backward"})
"""checkpoint.py's recomputing functions: non-reentrant's `recompute_fn`, reentrant's
`CheckpointFunction.backward`."""
_MODULES = os.sep.join(("torch", "nn", "modules", ""))
MAX_FRAMES = 64


def is_recomputing(code: CodeType) -> bool:
    """Is this the code of checkpoint's recomputation (torch/utils/checkpoint.py)?"""
    return code.co_name in _RECOMPUTE and code.co_filename.endswith(_CHECKPOINT)


def _name(fn: Any) -> str:
    """A function's qualified name, read only off a plain function (a snippet's callable object
    could run code of its own on an attribute read), and kept short."""
    if isinstance(fn, FunctionType):
        return fn.__qualname__[:80]
    return type(fn).__name__[:80]


def _dtype(value: Any) -> str:
    """`torch.float32` for a dtype; anything else is not formatted (its `__format__` is the
    snippet's code)."""
    return str(value) if isinstance(value, torch.dtype) else "?"


def _locals(frame: FrameType) -> dict[str, Any]:
    try:
        return dict(frame.f_locals)
    except Exception:  # noqa: BLE001 - a frame whose locals cannot be read names nothing
        return {}


def _forward_region(frame: FrameType) -> Found:
    """The words for calls inside a `custom_fwd`-decorated forward (`frame` is `decorate_fwd`'s)."""
    seen = _locals(frame)
    fwd = _name(seen.get("fwd"))
    cast = _dtype(seen.get("cast_inputs")) if seen.get("cast_inputs") is not None else None
    if cast is None:
        return Found(
            "custom_fwd",
            f"inside {fwd} (custom_fwd without cast_inputs leaves autocast as it was)",
        )
    if seen.get("autocast_context"):
        return Found(
            "custom_fwd", f"custom_fwd(cast_inputs={cast}) turned autocast off inside {fwd}"
        )
    return Found(
        "custom_fwd",
        f"inside {fwd}, called outside autocast, where custom_fwd(cast_inputs={cast}) does nothing",
    )


class Found(NamedTuple):
    kind: RegionKind
    words: str
    autocast: dict[str, str] | None = None
    """During backward, the autocast state the region restored ({device type: dtype} of those
    on); None when it is the live state (the forward pass) or unknown."""


def region_of(frame: FrameType | None, filename: str, backward_line: Any) -> Found | None:
    """What the snippet frame `frame` (where a traced call was made) runs inside, if anything.

    Outside backward only `custom_fwd` can apply, and the walk goes through the snippet's own
    frames and nn.Module plumbing alone (a frame or two: it runs for every traced call). Inside
    backward (`backward_line`: the line of the backward call, `False` when not in one) it goes
    on through torch's frames, up to the engine's entry, looking for checkpoint's or custom_bwd's."""
    in_backward = backward_line is not False
    if not in_backward and frame is not None and frame.f_code.co_name == "<module>":
        return None  # the snippet's top level runs inside no decorator: most calls stop here
    on = f" on line {backward_line}" if isinstance(backward_line, int) else ""
    f = frame
    for _ in range(MAX_FRAMES):
        if f is None or f.f_code is ENGINE_RUN:
            break
        code = f.f_code
        if code is DECORATE_FWD:
            return _forward_region(f)
        if code is DECORATE_BWD and in_backward:
            return _backward_region(f, on)
        file = code.co_filename
        if in_backward and is_recomputing(code):
            state = _restored(_locals(f))
            shown = ", ".join(f"{d}, {t}" for d, t in state.items()) if state else "off"
            return Found(
                "recompute",
                f"checkpoint's recomputation during backward{on}, under the autocast state "
                f"checkpoint restored from the forward pass (autocast {shown})",
                state,
            )
        if not in_backward and file != filename and _MODULES not in file:
            return None
        f = f.f_back
    if in_backward:
        return Found("backward", f"run by the backward pass{on}")
    return None


def _restored(seen: dict[str, Any]) -> dict[str, str]:
    """{device type: dtype} of the autocast state checkpoint re-entered, from the recomputing
    frame's own variables (`recompute_fn`'s, or `CheckpointFunction.backward`'s `ctx`)."""
    ctx = seen.get("ctx")
    device = seen.get("device_type", getattr(ctx, "device_type", None))
    pairs = (
        (device, seen.get("device_autocast_kwargs", getattr(ctx, "device_autocast_kwargs", None))),
        ("cpu", seen.get("cpu_autocast_kwargs", getattr(ctx, "cpu_autocast_kwargs", None))),
    )
    state: dict[str, str] = {}
    for dev, kwargs in pairs:
        if isinstance(dev, str) and isinstance(kwargs, dict) and kwargs.get("enabled"):
            state.setdefault(dev, str(kwargs.get("dtype")).removeprefix("torch."))
    return state


def cast_region(frame: FrameType) -> Found | None:
    """For a `.to()` that custom_fwd's `_cast` makes (`frame`: `_cast`'s): the decorator, named."""
    f: FrameType | None = frame
    for _ in range(MAX_FRAMES):
        if f is None:
            return None
        if f.f_code is DECORATE_FWD:
            seen = _locals(f)
            fwd = _name(seen.get("fwd"))
            return Found(
                "custom_fwd_cast",
                f"custom_fwd(cast_inputs={_dtype(seen.get('cast_inputs'))}) of {fwd}",
            )
        f = f.f_back
    return None


def _backward_region(frame: FrameType, on: str) -> Found:
    seen = _locals(frame)
    bwd = _name(seen.get("bwd"))
    args = seen.get("args") or ()
    ctx = args[0] if isinstance(args, tuple) and args else None
    used = getattr(ctx, "_fwd_used_autocast", None)
    dtype = str(getattr(ctx, "_dtype", "")).removeprefix("torch.")
    device = seen.get("device_type")
    state = {device: dtype} if used and isinstance(device, str) else {}
    shown = f"autocast on, {dtype}" if used else "autocast off"
    return Found(
        "custom_bwd",
        f"in {bwd} during backward{on}, which custom_bwd runs under its forward's autocast "
        f"state ({shown})",
        state,
    )
