"""GradScaler events for `sandbox.explain`: what the scaler did each iteration, and how it was misused.

The explainer runs in a throwaway child process, so wrapping `torch.amp.GradScaler` methods on the
class is acceptable; they are restored on exit all the same. Subclasses (`torch.cuda.amp.GradScaler`,
`torch.cpu.amp.GradScaler`) inherit the wrapped methods unless they override them, in which case
their own methods are wrapped too.

What is misuse, and how it is worded, is in `sandbox.explain.scaler_misuse` (and, for reads of
still-scaled gradients, `sandbox.explain.grad_reads`); what an optimizer that unscales by itself
did in a step with inf/NaN gradients, in `sandbox.explain.fused_step`.

Runs in: the runner.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch

from sandbox.explain.fused_step import FusedStepProbe, handles_scaling
from sandbox.explain.grad_reads import ScaledGrads
from sandbox.explain.iterations import IterationLog
from sandbox.explain.report import ScalerEvent
from sandbox.explain.scaler_errors import explain_scaler_error
from sandbox.explain.scaler_misuse import ScaleMismatch, direct_step, unscaled_backward
from sandbox.frames import traceback_line

MAX_EVENTS = 100
_METHODS = ("scale", "unscale_", "step", "update")


def _value(t: Any) -> float | None:
    if isinstance(t, torch.Tensor) and t.numel() == 1:
        return float(t.item())
    return None


def _found_inf(scaler: Any, optimizer: Any) -> bool | None:
    states = getattr(scaler, "_per_optimizer_states", None)
    if not states:
        return None
    state = states.get(id(optimizer))
    if not state or not state.get("found_inf_per_device"):
        return None
    return bool(sum(float(v.item()) for v in state["found_inf_per_device"].values()))


class ScalerMonitor:
    """Wraps GradScaler methods and the optimizer step hooks; events are folded with counts."""

    def __init__(self, line_now: Callable[[], int | None], tracer: Any, filename: str):
        """`tracer.pause()` keeps the scaler's own reads untraced (and unseen by the snippet's modes)."""
        self.line_now = line_now
        self.tracer = tracer
        self.filename = filename
        self._log = IterationLog(MAX_EVENTS)
        self.errors: list[tuple[BaseException, dict[str, Any]]] = []
        self._saved: list[tuple[type, str, Any]] = []
        self._hooks: list[Any] = []
        self._in_step = 0
        self._scaled: dict[int, tuple[weakref.ref, float | None]] = {}
        self._backwards: list[tuple[int | None, bool]] = []
        self._last_scale: float | None = None
        self._unscaled_opts: set[int] = set()
        self.grads = ScaledGrads(filename, self.add)
        self._mismatch = ScaleMismatch()
        self._fused = FusedStepProbe()

    # installation

    def install(self) -> None:
        classes: list[type] = [torch.amp.GradScaler]
        for path in ("torch.cuda.amp", "torch.cpu.amp"):
            try:
                module = __import__(path, fromlist=["GradScaler"])
                classes.append(module.GradScaler)
            except Exception:  # noqa: BLE001, S110
                pass
        for cls in classes:
            for name in _METHODS:
                if name in cls.__dict__:
                    original = cls.__dict__[name]
                    self._saved.append((cls, name, original))
                    setattr(cls, name, self._wrap(name, original))
        try:
            from torch.optim.optimizer import (
                register_optimizer_step_post_hook,
                register_optimizer_step_pre_hook,
            )

            self._hooks.append(register_optimizer_step_pre_hook(self._on_optimizer_step))
            self._hooks.append(register_optimizer_step_post_hook(self._after_optimizer_step))
        except Exception:  # noqa: BLE001, S110
            pass

    def uninstall(self) -> None:
        while self._saved:
            cls, name, original = self._saved.pop()
            setattr(cls, name, original)
        while self._hooks:
            self._hooks.pop().remove()

    # event log (folded in time order: see sandbox.explain.iterations)

    @property
    def events(self) -> list[ScalerEvent]:
        return self._log.events

    @property
    def truncated(self) -> bool:
        return self._log.truncated

    def add(self, event: dict[str, Any]) -> None:
        self._log.add(event)

    # scaled-loss tracking, fed by the tracer

    def mark_scaled(self, out: Any, scale: float | None) -> None:
        items = out if isinstance(out, (list, tuple)) else (out,)
        for t in items:
            if isinstance(t, torch.Tensor):
                self._scaled[id(t)] = (weakref.ref(t), scale)
        if len(self._scaled) > 256:
            self._scaled = {k: v for k, v in self._scaled.items() if v[0]() is not None}

    def _scale_of(self, t: Any) -> tuple[bool, float | None]:
        """(is `t` a scaled loss or made from one, the scale it was multiplied by)."""
        entry = self._scaled.get(id(t))
        if entry is None or entry[0]() is not t:
            return False, None
        return True, entry[1]

    def after_call(self, name: str, line: int | None, args: tuple[Any, ...], out: Any) -> None:
        """Follow scaled tensors through snippet ops and note which backward() used them."""
        if name in ("Tensor.backward", "torch.autograd.backward"):
            target = args[0] if args else None
            targets = target if isinstance(target, (list, tuple)) else (target,)
            scales = [self._scale_of(t) for t in targets]
            scaled = [s for ok, s in scales if ok]
            if len(self._backwards) < 64:
                self._backwards.append((line, bool(scaled)))
            if scaled:
                self.grads.open(scaled[0], line)
                self._mismatch.backward(scaled[0], line)
            return
        if self._scaled and isinstance(out, torch.Tensor):
            for a in args:
                ok, scale = self._scale_of(a) if isinstance(a, torch.Tensor) else (False, None)
                if ok:
                    self.mark_scaled(out, scale)
                    break

    # the optimizer's own step hooks

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if torch.compiler.is_compiling():
            return  # compiled, dynamo would trace this hook into the snippet's graph (and break it)
        if self._in_step and not handles_scaling(optimizer):
            return  # called by scaler.step, which reports it
        try:
            with self.tracer.pause():
                if self._in_step:
                    self._fused.before(optimizer)
                    return
                self._direct_step(optimizer)
        except Exception:  # noqa: BLE001, S110
            pass

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._in_step or torch.compiler.is_compiling() or not handles_scaling(optimizer):
            return
        try:
            with self.tracer.pause():
                self._fused.after(optimizer)
        except Exception:  # noqa: BLE001, S110
            pass

    def _direct_step(self, optimizer: Any) -> None:
        """`optimizer.step()` called by the snippet, not by scaler.step: after a scaled backward
        that is a misuse (`scaler_misuse.direct_step`)."""
        scaled_lines = [ln for ln, scaled in self._backwards if scaled]
        if scaled_lines:
            line = self.line_now()
            message = direct_step(
                line, id(optimizer) in self._unscaled_opts, self._last_scale, scaled_lines[0]
            )
            self.add({"event": "misuse", "line": line, "message": message})
        self._backwards.clear()

    # the wrappers

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        tracer = self.tracer

        @functools.wraps(original)
        def wrapper(scaler: Any, *args: Any, **kwargs: Any) -> Any:
            if torch._C._autograd._profiler_enabled() or torch.compiler.is_compiling():
                # Its reads (`item()` of the scale) would be counted in the snippet's profile.
                return original(scaler, *args, **kwargs)
            line = monitor.line_now()
            before: dict[str, Any] = {}
            try:
                with tracer.pause():
                    before = monitor._before(name, scaler, args, line)
            except Exception:  # noqa: BLE001, S110
                pass
            if name == "step":
                monitor._in_step += 1
            try:
                result = original(scaler, *args, **kwargs)
            except BaseException as exc:
                if not (name == "unscale_" and monitor._in_step):  # step() reports its own
                    monitor._error(name, line, exc)
                raise
            finally:
                if name == "step":
                    monitor._in_step -= 1
            try:
                with tracer.pause():
                    monitor._after(name, scaler, args, line, result, before)
            except Exception:  # noqa: BLE001, S110
                pass
            return result

        return wrapper

    def _before(
        self, name: str, scaler: Any, args: tuple[Any, ...], line: int | None
    ) -> dict[str, Any]:
        enabled = bool(getattr(scaler, "_enabled", False))
        if not enabled or getattr(scaler, "_scale", None) is None:
            return {}
        if name == "update":
            return {"old": _value(scaler._scale)}
        opt = args[0] if args else None
        if name == "unscale_" and not self._in_step:
            self._unscaling(opt, _value(scaler._scale), name, line)
        if name == "step" and opt is not None:
            state = scaler._per_optimizer_states.get(id(opt))
            ready = state is None or not state.get("found_inf_per_device")
            unscaled = bool(self._backwards) and not any(s for _, s in self._backwards)
            if unscaled:
                message = unscaled_backward(self._backwards[0][0], line, _value(scaler._scale))
                self.add({"event": "misuse", "line": line, "message": message})
            if ready:
                self._unscaling(opt, _value(scaler._scale), name, line)
            return {"stage_ready": ready, "unscaled_loss": unscaled}
        return {}

    def _unscaling(self, opt: Any, scale: float | None, call: str, line: int | None) -> None:
        message = self._mismatch.unscaling(opt, scale, call, line)
        if message is not None:
            self.add({"event": "misuse", "line": line, "message": message})

    def _after(
        self,
        name: str,
        scaler: Any,
        args: tuple[Any, ...],
        line: int | None,
        result: Any,
        before: dict[str, Any],
    ) -> None:
        enabled = bool(getattr(scaler, "_enabled", False))
        if not enabled:
            if name in ("scale", "step"):
                self.add({"event": name, "line": line, "enabled": False})
            return
        if name == "scale":
            value = _value(getattr(scaler, "_scale", None))
            self._last_scale = value
            self.mark_scaled(result, value)
            self.add({"event": "scale", "line": line, "scale": value})
        elif name == "unscale_":
            opt = args[0] if args else None
            self._unscaled_opts.add(id(opt))
            self.grads.unscaled(opt)
            self.add({"event": "unscale_", "line": line, "explicit": not self._in_step})
            if not self._in_step:  # inside step() the step event reports the check
                found = _found_inf(scaler, opt)
                if found is not None:
                    self.add({"event": "inf_check", "line": line, "found_inf": found})
        elif name == "step":
            opt = args[0] if args else None
            found = _found_inf(scaler, opt)
            if before.get("stage_ready") and found is not None:
                self.add({"event": "inf_check", "line": line, "found_inf": found})
            if handles_scaling(opt):
                # scaler.step called optimizer.step() with grad_scale and found_inf set: the
                # optimizer unscaled and (on inf/NaN) skipped the update itself
                event: dict[str, Any] = {"event": "step", "line": line, "taken": True}
                event.update({"in_optimizer": True, "found_inf": bool(found)})
                event.update(self._fused.result(opt) or {})
            else:
                event = {"event": "step", "line": line, "taken": not found}
            if before.get("unscaled_loss"):
                event["unscaled_loss"] = True
            self.add(event)
            self.grads.unscaled(opt)  # stepped: a later read is no read before the step
            self._backwards.clear()
        elif name == "update":
            old = before.get("old")
            new = _value(getattr(scaler, "_scale", None))
            change = "unchanged"
            if old is not None and new is not None and new != old:
                change = (
                    "halved"
                    if abs(new * 2 - old) < 1e-6 * old
                    else (
                        "doubled"
                        if abs(new - 2 * old) < 1e-6 * new
                        else ("lowered" if new < old else "raised")
                    )
                )
            self.add(
                {
                    "event": "update",
                    "line": line,
                    "old_scale": old,
                    "new_scale": new,
                    "change": change,
                }
            )
            self._unscaled_opts.clear()
            self.grads.close()
            self._mismatch.update(line, old, new)

    def _error(self, name: str, line: int | None, exc: BaseException) -> None:
        if any(e is exc for e, _ in self.errors):
            return  # already recorded by an inner wrapper (step -> unscale_)
        explanation = explain_scaler_error(exc, call=None)
        event = {
            "event": "error",
            "line": line,
            "call": name,
            "error": f"{type(exc).__name__}: {str(exc).strip()}"[:300],
            "message": explanation or f"scaler.{name}() raised {type(exc).__name__}",
        }
        self.errors.append((exc, event))
        self.add(event)

    def error_for(self, exc: BaseException) -> dict[str, Any] | None:
        for e, event in self.errors:
            if e is exc:
                return event
        return None

    def line_of_exception(self, exc: BaseException) -> int | None:
        return traceback_line(exc, self.filename)
