"""GradScaler misuse that raises nothing: the update is wrong, silently.

- `loss.backward()` on an unscaled loss, then `scaler.step()`: the step divides true gradients by
  the scale (`unscaled_backward`);
- `optimizer.step()` after `scaler.scale(loss).backward()`: a step on scaled gradients, or one
  that is never skipped (`direct_step`);
- gradients produced at one scale and unscaled at another (`ScaleMismatch`): `update()` between
  two optimizers' steps, when it changed the scale, unscales the second optimizer's gradients by
  the new scale (after an overflow halved it, twice as large as they should be).

Runs in: the runner (part of the explanation). Only the standard library is imported.
"""

from __future__ import annotations

from typing import Any


def _g(x: float | None) -> str:
    return f"{x:g}" if x is not None else "?"


def unscaled_backward(backward_line: int | None, step_line: int | None, scale: float | None) -> str:
    return (
        f"loss.backward() on line {backward_line} ran on the unscaled loss, but "
        f"scaler.step() on line {step_line} divided the gradients by the scale "
        f"({_g(scale)}), so the update used gradients {_g(scale)} times too small; "
        "call scaler.scale(loss).backward()"
    )


def direct_step(
    line: int | None, unscaled_first: bool, scale: float | None, backward_line: int | None
) -> str:
    if unscaled_first:
        return (
            f"optimizer.step() on line {line} was called directly instead of "
            "scaler.step(optimizer): the gradients were unscaled, but a step with "
            "inf/NaN gradients will not be skipped"
        )
    shown = f" ({_g(scale)})" if scale else ""
    return (
        f"optimizer.step() on line {line} used gradients still multiplied by the "
        f"loss scale{shown} from scaler.scale(loss).backward() on line "
        f"{backward_line}; call scaler.step(optimizer) so they are unscaled first"
    )


class ScaleMismatch:
    """Which scale the latest scaled backward produced its gradients at, whether `update()` ran
    since, and which optimizers have been unscaled since: the second optimizer of an iteration
    unscaled after an `update()` that changed the scale gets the wrong divisor."""

    def __init__(self) -> None:
        self._backward: tuple[float | None, int | None] | None = None
        self._update: tuple[int | None, float | None, float | None] | None = None
        self._done: set[int] = set()
        self._flagged = 0

    def backward(self, scale: float | None, line: int | None) -> None:
        self._backward, self._update = (scale, line), None
        self._done = set()

    def update(self, line: int | None, old: float | None, new: float | None) -> None:
        if self._backward is not None and self._update is None:
            self._update = (line, old, new)

    def unscaling(
        self, optimizer: Any, now: float | None, call: str, line: int | None
    ) -> str | None:
        """Before `unscale_(optimizer)` or `step(optimizer)` divides its gradients by `now`: the
        misuse in words, or None. Each optimizer counts once per backward."""
        if id(optimizer) in self._done or self._backward is None:
            return None
        self._done.add(id(optimizer))
        made, backward_line = self._backward
        if self._update is None or made is None or now is None or made == now or not now:
            return None
        if self._flagged >= 8:
            return None
        self._flagged += 1
        update_line = self._update[0]
        ratio = made / now
        size = f"{ratio:g} times too large" if ratio > 1 else f"{1 / ratio:g} times too small"
        return (
            f"scaler.{call}() on line {line} divided gradients made at scale {_g(made)} "
            f"(scaler.scale(loss).backward() on line {backward_line}) by the scale {_g(now)}, "
            f"which update() on line {update_line} had set in between: this optimizer's "
            f"gradients came out {size}; call update() once per iteration, after every "
            "optimizer's step"
        )
