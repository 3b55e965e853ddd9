"""GradScaler events for `sandbox.explain`: what the scaler did each iteration, and how it was misused.

The explainer runs in a throwaway child process, so wrapping `torch.amp.GradScaler` methods on the
class is acceptable; they are restored on exit all the same. Subclasses (`torch.cuda.amp.GradScaler`,
`torch.cpu.amp.GradScaler`) inherit the wrapped methods unless they override them, in which case
their own methods are wrapped too.

Runs in: the runner.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch

from sandbox.explain.iterations import IterationLog
from sandbox.explain.report import ScalerEvent
from sandbox.frames import traceback_line

MAX_EVENTS = 100
_METHODS = ("scale", "unscale_", "step", "update")

# (substring of the error message, explanation; "{call}" and "{line}" are filled in)
_SCALER_ERRORS: tuple[tuple[str, str], ...] = (
    (
        "but _scale is None",
        "scaler.{call}() ran but scaler.scale(loss) was never called, so the scaler has no scale",
    ),
    (
        "but _growth_tracker is None",
        "scaler.{call}() ran but scaler.scale(loss) was never called, so the scaler has no scale",
    ),
    (
        "No inf checks were recorded for this optimizer",
        (
            "scaler.step() found no gradients to check: "
            "no parameter of this optimizer has a .grad, so backward() did not run on the scaled loss "
            "(scaler.scale(loss).backward()) before step(), or the gradients were cleared in between"
        ),
    ),
    (
        "No inf checks were recorded prior to update",
        (
            "scaler.update() ran but no scaler.step(optimizer) "
            "happened since the last update(), so there was nothing to adjust the scale from"
        ),
    ),
    (
        "unscale_() has already been called on this optimizer",
        (
            "scaler.unscale_(optimizer) was called "
            "twice in one iteration; call it at most once between update() calls"
        ),
    ),
    (
        "unscale_() is being called after step()",
        (
            "scaler.unscale_(optimizer) came after "
            "scaler.step(optimizer); unscale before stepping (for example to clip gradients), not after"
        ),
    ),
    (
        "step() has already been called since the last update()",
        (
            "scaler.step(optimizer) ran twice "
            "without scaler.update() in between; call update() once per iteration, after the steps"
        ),
    ),
    (
        "Attempting to unscale FP16 gradients",
        (
            "the parameters themselves are float16 (for example "
            "after model.half()), so their gradients are float16 and GradScaler refuses to unscale them; "
            "keep parameters in float32 and let autocast do the casting"
        ),
    ),
    ("Closure use is not currently supported", "scaler.step() does not accept a closure"),
)


def explain_scaler_error(exc: BaseException, call: str | None = None) -> str | None:
    """A learner's explanation of a GradScaler error message, or None if it is not one."""
    text = str(exc)
    for needle, explanation in _SCALER_ERRORS:
        if needle in text:
            if call is None:
                call = "step"
                if text.startswith("Attempted "):
                    call = text.split()[1]
            return explanation.format(call=call)
    return None


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
    """Wraps GradScaler methods and the optimizer step hook; events are folded with counts."""

    def __init__(self, line_now: Callable[[], int | None], tracer: Any, filename: str):
        """`tracer.pause()` keeps the scaler's own reads untraced (and unseen by the snippet's modes)."""
        self.line_now = line_now
        self.tracer = tracer
        self.filename = filename
        self._log = IterationLog(MAX_EVENTS)
        self.errors: list[tuple[BaseException, dict[str, Any]]] = []
        self._saved: list[tuple[type, str, Any]] = []
        self._hook: Any = None
        self._in_step = 0
        self._scaled: dict[int, weakref.ref] = {}
        self._backwards: list[tuple[int | None, bool]] = []
        self._last_scale: float | None = None
        self._unscaled_opts: set[int] = set()

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
            from torch.optim.optimizer import register_optimizer_step_pre_hook

            self._hook = register_optimizer_step_pre_hook(self._on_optimizer_step)
        except Exception:  # noqa: BLE001
            self._hook = None

    def uninstall(self) -> None:
        while self._saved:
            cls, name, original = self._saved.pop()
            setattr(cls, name, original)
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

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

    def mark_scaled(self, out: Any) -> None:
        items = out if isinstance(out, (list, tuple)) else (out,)
        for t in items:
            if isinstance(t, torch.Tensor):
                self._scaled[id(t)] = weakref.ref(t)
        if len(self._scaled) > 256:
            self._scaled = {k: r for k, r in self._scaled.items() if r() is not None}

    def _is_scaled(self, t: Any) -> bool:
        ref = self._scaled.get(id(t))
        return ref is not None and ref() is t

    def after_call(self, name: str, line: int | None, args: tuple[Any, ...], out: Any) -> None:
        """Follow scaled tensors through snippet ops and note which backward() used them."""
        if name in ("Tensor.backward", "torch.autograd.backward"):
            target = args[0] if args else None
            targets = target if isinstance(target, (list, tuple)) else (target,)
            scaled = any(self._is_scaled(t) for t in targets)
            if len(self._backwards) < 64:
                self._backwards.append((line, scaled))
            return
        if self._scaled and isinstance(out, torch.Tensor):
            for a in args:
                if isinstance(a, torch.Tensor) and self._is_scaled(a):
                    self.mark_scaled(out)
                    break

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._in_step or torch.compiler.is_compiling():
            return  # compiled, dynamo would trace this hook into the snippet's graph (and break it)
        try:
            scaled_lines = [ln for ln, scaled in self._backwards if scaled]
            if scaled_lines:
                line = self.line_now()
                if id(optimizer) in self._unscaled_opts:
                    message = (
                        f"optimizer.step() on line {line} was called directly instead of "
                        "scaler.step(optimizer): the gradients were unscaled, but a step with "
                        "inf/NaN gradients will not be skipped"
                    )
                else:
                    scale = f" ({self._last_scale:g})" if self._last_scale else ""
                    message = (
                        f"optimizer.step() on line {line} used gradients still multiplied by the "
                        f"loss scale{scale} from scaler.scale(loss).backward() on line "
                        f"{scaled_lines[0]}; call scaler.step(optimizer) so they are unscaled first"
                    )
                self.add({"event": "misuse", "line": line, "message": message})
            self._backwards.clear()
        except Exception:  # noqa: BLE001, S110
            pass

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
        if name == "update" and enabled:
            return {"old": _value(getattr(scaler, "_scale", None))}
        if name == "step" and enabled and args and getattr(scaler, "_scale", None) is not None:
            state = scaler._per_optimizer_states.get(id(args[0]))
            ready = state is None or not state.get("found_inf_per_device")
            if self._backwards and not any(scaled for _, scaled in self._backwards):
                scale = _value(scaler._scale)
                bline = self._backwards[0][0]
                self.add(
                    {
                        "event": "misuse",
                        "line": line,
                        "message": (
                            f"loss.backward() on line {bline} ran on the unscaled loss, but "
                            f"scaler.step() on line {line} divided the gradients by the scale "
                            f"({scale:g}), so the update used gradients {scale:g} times too small; "
                            "call scaler.scale(loss).backward()"
                        ),
                    }
                )
            return {"stage_ready": ready}
        return {}

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
            self.mark_scaled(result)
            self.add({"event": "scale", "line": line, "scale": value})
        elif name == "unscale_":
            opt = args[0] if args else None
            self._unscaled_opts.add(id(opt))
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
            self.add({"event": "step", "line": line, "taken": not found})
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
