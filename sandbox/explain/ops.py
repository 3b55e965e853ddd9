"""Op tracing for `sandbox.explain`: which torch calls a snippet line made, in which dtypes, and why.

Two modes work together. A `TorchFunctionMode` sees user-level calls (`torch.nn.functional.linear`,
`Tensor.sum`) with the frame that made them; a `TorchDispatchMode` sees the aten ops underneath,
including the `aten._to_copy` casts that autocast inserts (the autocast dispatch key runs before the
Python dispatch key, so those casts reach the mode). What the tracer records of each call becomes
a row of the report's ops (`sandbox.explain.op_rows`, which `OpTracer` extends).

Runs in: the runner. Only torch and the standard library are imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from sandbox.explain.backward_rows import BackwardRows
from sandbox.explain.calls import (
    BACKWARD_NAMES,
    CONVERSIONS,
    LOW_PRECISION,
    Call,
    autocast_state,
    describe_inputs,
    dtype_name,
    first_tensor,
    involves_low_precision,
    locate,
    op_name,
    tensors_in,
    wrote_into,
)
from sandbox.explain.cast_cache import CastCache
from sandbox.explain.grad_reads import ScaledGrads
from sandbox.explain.modes import DispatchMode, FunctionMode
from sandbox.explain.op_rows import OpRows
from sandbox.explain.regions import CAST_INPUTS, Found, cast_region, region_of
from sandbox.explain.unseen import OwnWork, decomposes_past_autocast, own_dispatch
from sandbox.frames import Caller, plain_call, snippet_line

EVERY_CALL_CHECKED = 64
"""Calls of one op at one place whose results are all checked (`OpTracer._check_now`)."""

_CAST_OPS = frozenset(
    {
        torch.ops.aten._to_copy.default,
        # inference_mode skips the decomposition of `to`, so its casts arrive as aten.to
        torch.ops.aten.to.dtype,
        torch.ops.aten.to.dtype_layout,
        torch.ops.aten.to.device,
        torch.ops.aten.to.other,
    }
)

# --- the tracer -------------------------------------------------------------------------------

DispatchHook = Callable[[Any, tuple[Any, ...], dict[str, Any], Any, Any, "Call | None"], None]
PreHook = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


class OpTracer(OpRows):
    """Records user-level torch calls, folded by (line, op, signature), capped at `max_ops` rows."""

    def __init__(self, filename: str, max_ops: int) -> None:
        super().__init__(max_ops)
        self.filename = filename
        self.stack: list[Call] = []
        self.paused = 0
        self._site_calls: dict[tuple[Any, int | None], int] = {}
        self.errors: list[str] = []
        self.before_dispatch: PreHook | None = None
        self.after_dispatch: DispatchHook | None = None
        self.after_call: (
            Callable[[Call, Any, tuple[Any, ...], dict[str, Any], Any], None] | None
        ) = None
        self._modes: list[Any] = []
        self._dispatch_mode: DispatchMode | None = None
        self._dispatch_depth = 0
        self.backward = BackwardRows(self)
        """The snippet's backward call under way, and rows for its code the backward pass runs."""
        self.grads: ScaledGrads | None = None
        """Set by the explainer: told of `p.grad` reads and norms while gradients are scaled."""
        self.cache: CastCache | None = None
        """Set by the explainer: autocast's cached casts, told of each cast and each op's inputs."""

    # installation

    def install(self) -> None:
        """Push the function mode for the whole run; the dispatch mode is pushed per call."""
        tf = FunctionMode(self)
        tf.__enter__()
        self._modes.append(tf)
        self._dispatch_mode = DispatchMode(self)

    def uninstall(self) -> None:
        """Pop our function mode, and any mode the snippet pushed above it and never popped."""
        from torch.overrides import _pop_mode

        while self._modes:
            mode = self._modes.pop()
            try:
                while torch._C._len_torch_function_stack() > 0:
                    if _pop_mode() is mode:
                        break
            except Exception as exc:  # noqa: BLE001 - a mode stack the snippet broke
                self.note_error(f"could not remove {type(mode).__name__}: {exc}")

    def pause(self) -> OwnWork:
        """Let the explainer's own tensor work run untraced, and unseen by the snippet (`OwnWork`)."""
        return OwnWork(self)

    def note_error(self, message: str) -> None:
        if len(self.errors) < 3:
            self.errors.append(message)

    # the two hooks

    def on_function(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], through: Caller = plain_call
    ) -> Any:
        """Every torch-function call while installed; only the snippet's own are recorded. `through`
        makes the call itself (`frames.called_from`: from where the snippet made it).

        The dispatch mode costs ~10 us per aten op, so it is pushed only around calls where it can
        see something: direct calls that run under autocast, touch float16/bfloat16 or run the
        backward pass, and internal calls (optimizer, GradScaler) with low-precision tensors.

        While the snippet runs torch.profiler, nothing is traced: the dispatch mode would re-enter
        the dispatcher for every op and the profile would count each op twice (and the hazard
        checks' own ops), so the snippet would print a different profile than torch alone gives.
        """
        if self.paused or torch._C._autograd._profiler_enabled():
            return through(func, args, kwargs)
        if self.grads is not None and self.grads.pending and self.grads.watches(func):
            try:
                with self.pause():
                    self.grads.before_call(func, args, kwargs)
            except Exception as exc:  # noqa: BLE001
                self.note_error(f"gradient read {func!r}: {exc!r}")
        # Reading the inputs' dtypes is not the snippet's call: a tensor subclass's own
        # `__torch_function__` is not told of it (it printed a `__get__` for each read).
        with torch._C.DisableTorchFunctionSubclass():
            plan = self._plan(func, args, kwargs, sys._getframe(2))
        if plan is None:
            return through(func, args, kwargs)
        call, before, direct, watch = plan
        name = call.name
        push = watch and self._dispatch_depth == 0 and self._dispatch_mode is not None
        if (
            push
            and before is not None
            and before[1][1] is not None
            and decomposes_past_autocast(func)
        ):
            push = False  # watched, it would compute in float32 what autocast computes in low precision
        self.stack.append(call)
        if push:
            # `push` holds only with a mode (above), which mypy does not carry through a bool.
            self._dispatch_mode.__enter__()  # type: ignore[union-attr]
            self._dispatch_depth += 1
        backward = direct and name in BACKWARD_NAMES and self.backward.call is None
        if backward:
            self.backward.enter(call)
        try:
            out = through(func, args, kwargs)
        except BaseException as exc:
            self._leave(push, backward)
            if direct and before is not None:
                self._safe_record(call, before, None, exc)
            raise
        self._leave(push, backward)
        if direct and before is not None:
            call.inplace = wrote_into(name, args, kwargs, out)
            if call.inplace is not None and self.cache is not None and self.cache.live:
                where = f" on line {call.line}" if call.line is not None else ""
                self.cache.wrote(tensors_in(args, kwargs), f"{name}{where}")
            if name in BACKWARD_NAMES or first_tensor(out) is not None:
                self._safe_record(call, before, out, None)
            if self.after_call is not None and not own_dispatch(first_tensor(out)):
                try:
                    with self.pause():
                        self.after_call(call, func, args, kwargs, out)
                except Exception as exc:  # noqa: BLE001
                    self.note_error(f"after {name}: {exc!r}")
        return out

    def _plan(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], caller: FrameType
    ) -> tuple[Call, Any, bool, bool] | None:
        """(the call to record, its inputs and autocast state when the snippet made it directly,
        direct?, watch its ops?), or None when it is not traced."""
        name = op_name(func)
        if name is None:
            return None
        found = None
        if caller.f_code is CAST_INPUTS:  # custom_fwd casting its inputs: a row of its own
            found = self._region(cast_region, caller)
            line, direct, frame = snippet_line(self.filename, caller), found is not None, None
        else:
            line, direct, frame = locate(self.filename, caller)
            if not direct and not involves_low_precision(args, kwargs):
                return None  # library internals in float32: nothing to see
            if direct:
                found = self._region(region_of, frame, self.filename, False)
        call = Call(name, line, direct, frame if line is None else None)
        call.region = (found.kind, found.words) if found is not None else None
        before = None
        if direct:
            try:
                ac = self._autocast_for(args, kwargs)
                before = (describe_inputs(args, kwargs), ac)
                call.autocast = ac[1]
                watch = (
                    ac[1] is not None
                    or name in BACKWARD_NAMES
                    or name in CONVERSIONS
                    or involves_low_precision(args, kwargs)
                )
            except Exception as exc:  # noqa: BLE001
                self.note_error(f"inputs of {name}: {exc!r}")
                direct, watch = False, False
        else:
            watch = involves_low_precision(args, kwargs)
        return call, before, direct, watch

    def _region(self, find: Callable[..., Found | None], *args: Any) -> Found | None:
        """`find(*args)`, or None if it failed: a frame the snippet made odd names no region."""
        try:
            return find(*args)
        except Exception as exc:  # noqa: BLE001
            self.note_error(f"region of a call: {exc!r}")
            return None

    def _leave(self, pushed: bool, backward: bool = False) -> None:
        if backward:
            self.backward.leave()
        self.stack.pop()
        if pushed:
            self._dispatch_depth -= 1
            # Pushed only with a mode (`on_function`), which mypy does not carry through a bool.
            self._dispatch_mode.__exit__(None, None, None)  # type: ignore[union-attr]

    def on_dispatch(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.paused:
            return func(*args, **kwargs)
        pre = None
        before = self.before_dispatch
        call = self.stack[-1] if self.stack else None
        row = place = None
        if call is not None and call is self.backward.call:
            place = self.backward.place()  # the snippet's own code run by the backward pass
            if place is not None:
                row = self.backward.row_call(place, func)
        cache = self.cache
        if cache is not None and call is not None and cache.live:
            try:
                cache.handed(args, row or call)
            except Exception as exc:  # noqa: BLE001
                self.note_error(f"cached casts of {func}: {exc!r}")
        checked = not (args and own_dispatch(args[0])) and self._check_now(func, row or call)
        if (
            before is not None
            and checked
            and args
            and isinstance(args[0], torch.Tensor)
            and args[0].dtype in LOW_PRECISION
        ):
            try:
                with self.pause():
                    pre = before(func, args, kwargs)
            except Exception as exc:  # noqa: BLE001
                self.note_error(f"before {func}: {exc!r}")
        out = func(*args, **kwargs)
        casting = func in _CAST_OPS and call is not None
        low_out = isinstance(out, torch.Tensor) and out.dtype in LOW_PRECISION
        if not (casting or low_out or row or (pre is not None) or isinstance(out, (tuple, list))):
            return out
        try:
            with self.pause():
                if casting:
                    # `casting` holds only with a call, which mypy does not carry through a bool.
                    self._cast(call, args[0] if args else None, out)  # type: ignore[arg-type]
                if row is not None and place is not None:
                    self.backward.after(row, place, func, args, kwargs, out)
                if self.after_dispatch is not None and checked and not own_dispatch(out):
                    self.after_dispatch(func, args, kwargs, out, pre, row or call)
        except Exception as exc:  # noqa: BLE001
            self.note_error(f"after {func}: {exc!r}")
        return out

    def _cast(self, call: Call, src: Any, out: Any) -> None:
        """A cast under `call`: one of its casts when it is the snippet's own (a backward call
        counts every cast that ran under it), and maybe one autocast's cache keeps (`cast_cache`)."""
        if self.cache is not None:
            self.cache.cast(src, out, call)
        if not (isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor)):
            return
        if src.dtype == out.dtype:
            return
        if call.direct:
            call.casts.append((dtype_name(src.dtype), dtype_name(out.dtype), tuple(src.shape)))

    def _check_now(self, func: Any, call: Call | None) -> bool:
        """Whether the checks after an op (`after_dispatch`: overflow, underflow, absorption) run
        this time: at every call of an op at one place of the snippet at first, then, in a loop,
        at its 2**k-th calls. They cost ~140 us an op: a float16 accumulation loop of 100,000
        steps (the classic "it stops at 256") ran out of the learners' 10 s explained, where it
        takes 0.3 s. What they find persists once it happens (a sum stuck at 256 stays stuck, an
        inf stays inf), so a loop's is still found, a little later than it began."""
        key = (func, call.line if call is not None else None)
        n = self._site_calls.get(key, 0) + 1
        self._site_calls[key] = n
        return n <= EVERY_CALL_CHECKED or not n & (n - 1)

    # recording

    @staticmethod
    def _autocast_for(
        args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str | None, tuple[str, str] | None, tuple[str, str] | None]:
        """(device type of the inputs, autocast on that device, autocast on another device)."""
        device = None
        for t in tensors_in(args, kwargs):
            device = t.device.type
            break
        on_here = other = None
        for dev in ("cpu", "cuda"):
            on, dt = autocast_state(dev)
            if on and dt is not None:
                if device is None or dev == device:
                    if on_here is None:
                        on_here = (dev, dtype_name(dt))
                else:
                    other = (dev, dtype_name(dt))
        return device, on_here, other

    def _safe_record(self, call: Call, before: Any, out: Any, exc: BaseException | None) -> None:
        try:
            with self.pause():
                self._record(call, before, out, exc)
        except Exception as err:  # noqa: BLE001
            self.note_error(f"recording {call.name}: {err!r}")
