"""Rows for the snippet's own code that a backward pass runs: checkpoint's recomputation, a
`custom_bwd` backward, a hook or an autograd Function's backward.

The function mode does not see them: the snippet's `loss.backward()` runs inside the mode's own
handler, with the mode off, and the autograd engine keeps that state. The dispatch mode pushed
around the backward call does see their aten ops; for each, the Python stack says whether it
came from the snippet's code (a frame of the snippet's below the engine's entry) and from which
region (`sandbox.explain.regions`). Each computing aten op there becomes a row on the snippet
line that ran it, named `aten.<op>`, with the casts autocast made just before it in the same
place; every cast still counts for the backward row as well (as torch's DebugMode counts it),
so the backward row is unchanged and these rows say where its casts came from.

Runs in: the runner (part of the explanation). Only torch and the standard library are imported.
"""

from __future__ import annotations

import os
import sys
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

import torch

from sandbox.explain.calls import Call, autocast_state, describe_inputs, dtype_name, tensors_in
from sandbox.explain.regions import ENGINE_RUN, MAX_FRAMES, Found, is_recomputing, region_of
from sandbox.frames import STAND_IN

if TYPE_CHECKING:
    from sandbox.explain.ops import OpTracer

_AUTOGRAD = os.sep.join(("torch", "autograd", "__init__.py"))
"""`torch.autograd.backward` and `_make_grads` (the gradient of ones it starts from)."""
_QUIET = frozenset(
    {"detach", "alias", "t", "view", "_unsafe_view", "expand", "clone", "empty", "empty_like",
     "zeros_like", "ones_like", "lift_fresh", "copy_", "_to_copy", "to", "transpose", "permute"}
)  # fmt: skip
"""Aten ops that compute nothing worth a row of their own (their casts go to the next op)."""


_ON, _STOP, _SNIPPET, _RECOMPUTING = range(4)


def _classify(code: CodeType, filename: str) -> int:
    if code is ENGINE_RUN or code.co_filename.endswith(_AUTOGRAD):
        return _STOP
    if code.co_filename == filename and code.co_name != STAND_IN:
        return _SNIPPET
    return _RECOMPUTING if is_recomputing(code) else _ON


class BackwardRows:
    """The backward call under way, and the casts waiting for their op, by place."""

    def __init__(self, tracer: OpTracer) -> None:
        self.tracer = tracer
        self.call: Call | None = None
        self.line: int | None | bool = False
        """The backward call's line (None: unknown); False while no backward is under way."""
        self._pending: dict[tuple[Any, ...], tuple[list[Any], Any, Any, Any]] = {}
        """By place: (the casts waiting, the place, the last one's arguments and output)."""
        self._kinds: dict[CodeType, int] = {}

    def enter(self, call: Call) -> None:
        self.call, self.line = call, call.line
        self._pending.clear()

    def leave(self) -> None:
        try:
            with self.tracer.pause():
                self.flush()
        except Exception as exc:  # noqa: BLE001
            self.tracer.note_error(f"rows of the backward pass: {exc!r}")
        self.call, self.line = None, False
        self._pending.clear()

    def place(self) -> tuple[int, Found] | None:
        """(snippet line, region) of the aten op being dispatched now, when the snippet's own code
        made it during backward; None for the engine's own gradient ops. Every aten op of a
        backward pass asks: each frame's code is classified once (`_kinds`)."""
        f: FrameType | None = sys._getframe(2)  # the dispatch mode's frame, then up
        filename = self.tracer.filename
        for _ in range(MAX_FRAMES):
            if f is None:
                return None
            code = f.f_code
            kind = self._kinds.get(code)
            if kind is None:
                kind = self._kinds[code] = _classify(code, filename)
            if kind == _STOP:
                return None  # the engine's own ops, or backward()'s own work before it starts
            if kind == _SNIPPET:
                found = region_of(f, filename, self.line)
                return (f.f_lineno, found) if found is not None else None
            if kind == _RECOMPUTING:  # checkpoint of torch's code (an nn.Module) alone
                found = region_of(f, filename, self.line)
                line = self.line if isinstance(self.line, int) else None
                return (line, found) if found is not None and line is not None else None
            f = f.f_back
        return None

    def row_call(self, place: tuple[int, Found], func: Any) -> Call:
        """The row's call for an aten op at `place` (rows fold by line, op and what they saw)."""
        line, found = place
        call = Call(f"aten.{func.overloadpacket.__name__}", line, True)
        call.region = (found.kind, found.words)
        return call

    def after(
        self, call: Call, place: tuple[int, Found], func: Any, args: Any, kwargs: Any, out: Any
    ) -> None:
        """After an aten op at `place` (inside the tracer's pause): a cast waits for the op that
        uses it; any other computing op is recorded, with the casts that waited."""
        key = (place[0], place[1].kind, place[1].words)
        packet = func.overloadpacket.__name__
        if packet in ("_to_copy", "to"):
            src = args[0] if args else None
            if (
                isinstance(src, torch.Tensor)
                and isinstance(out, torch.Tensor)
                and src.dtype != out.dtype
            ):
                made = (dtype_name(src.dtype), dtype_name(out.dtype), tuple(src.shape))
                casts = self._pending[key][0] if key in self._pending else []
                casts.append(made)
                self._pending[key] = (casts, place, (src,), out)
            return
        if packet in _QUIET or getattr(func, "is_view", False):
            return
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return
        call.casts = self._pending.pop(key)[0] if key in self._pending else []
        self._row(call, place, args, kwargs, out)

    def flush(self) -> None:
        """Casts still waiting when the backward ends: checkpoint stops recomputing as soon as
        it has the tensors backward needs (its early stop), often right after the casts, so
        they are a row of their own, `aten._to_copy`."""
        for casts, place, args, out in self._pending.values():
            if out is None or place is None:
                continue
            call = Call("aten._to_copy", place[0], True)
            call.region = (place[1].kind, place[1].words)
            call.casts = casts
            self._row(call, place, args, {}, out)
        self._pending.clear()

    def _row(self, call: Call, place: tuple[int, Found], args: Any, kwargs: Any, out: Any) -> None:
        device = next((t.device.type for t in tensors_in(args, kwargs)), None)
        state = place[1].autocast
        if state is None and device is not None:  # hooks and Functions: the live state
            on, dt = autocast_state(device)
            state = {device: dtype_name(dt)} if on and dt is not None else {}
        ac = (device, state[device]) if device is not None and state and device in state else None
        self.tracer._record(call, (describe_inputs(args, kwargs), (device, ac, None)), out, None)
