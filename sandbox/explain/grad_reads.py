"""Reads of gradients still multiplied by the loss scale: clipping or a norm before `unscale_`.

After `scaler.scale(loss).backward()` every gradient is the true one times the scale, until
`scaler.unscale_(optimizer)` (or `scaler.step`, which unscales first) divides that optimizer's
gradients in place. A norm read in between is the scale times too large, so
`clip_grad_norm_(params, 1.0)` clips gradients that are far below the threshold, and
`clip_grad_value_` clamps scaled values to a bound meant for unscaled ones: no error, a wrong update.

How it is seen: while scaled gradients may exist (a scaled backward ran, and `update()` has not
yet closed the iteration), the tensors the snippet (or torch's clipping code it called) reads as
`p.grad` are remembered, less those an `unscale_` has since divided; a norm or a clamp of one of
them is the misuse. Nothing is watched outside that window.

Runs in: the runner (part of the explanation). Only torch and the standard library are imported.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

import torch

from sandbox.explain.calls import NAMES, op_name
from sandbox.frames import is_sandbox_file

GRAD: Any = vars(torch._C.TensorBase)["grad"]
"""`p.grad`'s descriptor: a read of it reaches the function mode as its bound `__get__`."""
NAMES[GRAD.__get__] = None  # a property read, never a row: the mode's fast path takes it

NORMS = frozenset(
    {
        "torch.linalg.linalg_vector_norm",
        "torch.linalg.linalg_norm",
        "torch.linalg.linalg_matrix_norm",
        "torch.functional.norm",
        "torch.norm",
        "Tensor.norm",
        "torch._foreach_norm",
        "torch.frobenius_norm",
        "torch.nuclear_norm",
    }
)
"""By `calls.op_name`: what `torch.linalg.vector_norm`, `torch.norm` (and so `get_total_norm`,
`clip_grad_norm_`) reach the function mode as."""
CLAMPS = frozenset(
    {
        "torch._foreach_clamp_min_",
        "torch._foreach_clamp_max_",
        "torch.clamp",
        "torch.clip",
        "Tensor.clamp",
        "Tensor.clamp_",
        "Tensor.clip",
        "Tensor.clip_",
        "Tensor.clamp_min_",
        "Tensor.clamp_max_",
    }
)
READERS = NORMS | CLAMPS
_WRAPPERS = frozenset({"_no_grad_wrapper", "wrapper", "inner", "decorate_context", "_fn"})
"""Frames of decorators between the snippet and the function it called (`clip_grad_norm_` is
wrapped in one), skipped when naming that function."""
_PRIVATE = frozenset({"_get_total_norm", "_clip_grads_with_norm_"})
"""Exported by `torch.nn.utils` without their underscore (`get_total_norm`, `clip_grads_with_norm_`)."""
_PLUMBING = ("torch/overrides.py", "torch/utils/_python_dispatch.py")
"""Files whose frames only hand a call over (and the sandbox's own): not what the snippet called."""


def public_name(name: str) -> str:
    """`torch.linalg.linalg_vector_norm` (the C function's name) as typed: `torch.linalg.vector_norm`."""
    if name.startswith("torch.linalg.linalg_"):
        return "torch.linalg." + name.removeprefix("torch.linalg.linalg_")
    return "torch.norm" if name == "torch.functional.norm" else name


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterable[Any]:
    for value in (*args, *kwargs.values()):
        if isinstance(value, (list, tuple)):
            yield from value
        else:
            yield value


class ScaledGrads:
    """The window between a scaled backward and `update()`, and the gradients read in it."""

    def __init__(self, filename: str, report: Callable[[dict[str, Any]], None]) -> None:
        self.filename = filename
        self.report = report
        self.pending = False
        self.scale: float | None = None
        self.backward_line: int | None = None
        self._read: dict[int, weakref.ref] = {}
        self._unscaled: dict[int, weakref.ref] = {}
        self._flagged: set[tuple[int | None, str]] = set()

    # the window, opened and closed by the GradScaler monitor

    def open(self, scale: float | None, line: int | None) -> None:
        self.pending, self.scale, self.backward_line = True, scale, line
        self._read.clear()
        self._unscaled.clear()

    def unscaled(self, optimizer: Any) -> None:
        """`unscale_(optimizer)` divided these gradients: reading them now is right."""
        if not self.pending:
            return
        for group in getattr(optimizer, "param_groups", ()):
            for p in group.get("params", ()):
                g = getattr(p, "grad", None)
                if isinstance(g, torch.Tensor):
                    self._unscaled[id(g)] = weakref.ref(g)

    def close(self) -> None:
        self.pending = False
        self._read.clear()
        self._unscaled.clear()

    # fed by the function mode while the window is open

    def saw_grad(self, out: Any) -> None:
        """After a `p.grad` read: remember the tensor if it is not unscaled yet."""
        if (
            isinstance(out, torch.Tensor)
            and id(out) not in self._read  # read again and again (scaler, optimizer, zero_grad)
            and not self._known(self._unscaled, out)
            and len(self._read) < 4096
        ):
            self._read[id(out)] = weakref.ref(out)

    def watches(self, func: Any) -> bool:
        """Whether `before_call` has anything to check for this call (no tensor is read)."""
        return bool(self._read) and op_name(func) in READERS

    def before_call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        name = op_name(func) or "?"  # `watches` said it has one
        scaled = [
            t
            for t in _tensors(args, kwargs)
            if isinstance(t, torch.Tensor)
            and self._known(self._read, t)
            and not self._known(self._unscaled, t)
        ]
        if not scaled:
            return
        line, called = self._snippet_call(sys._getframe(1))
        key = (line, called or name)  # one per call of the snippet's (clamp_min_ and clamp_max_)
        if key in self._flagged or len(self._flagged) >= 16:
            return
        self._flagged.add(key)
        self.report({"event": "misuse", "line": line, "message": self._message(name, called, line)})

    # wording

    def _message(self, name: str, called: str | None, line: int | None) -> str:
        scale = f"{self.scale:g}" if self.scale else "the loss scale"
        times = f"{self.scale:g} times" if self.scale else "many times"
        shown = public_name(name)
        where = (
            f"{called} (through {shown})"
            if called and called != shown.rsplit(".", 1)[-1]
            else shown
        )
        on = f" on line {line}" if line is not None else ""
        made = (
            f" from scaler.scale(loss).backward() on line {self.backward_line}"
            if self.backward_line
            else ""
        )
        if name in CLAMPS:
            did = (
                f"clamped gradients still multiplied by the loss scale ({scale}){made}: the "
                f"bound applied to values {times} too large, so the update is wrong, with no error"
            )
        else:
            did = (
                f"read the norm of gradients still multiplied by the loss scale ({scale}){made}: "
                f"the norm is {times} the true one, so clipping to it shrinks the gradients far "
                "more than intended, with no error"
            )
        return (
            f"{where}{on} {did}; call scaler.unscale_(optimizer) before clipping or reading norms"
        )

    def _snippet_call(self, frame: FrameType | None) -> tuple[int | None, str | None]:
        """(the snippet line, the name of the function it called that led here)."""
        called: str | None = None
        f = frame
        while f is not None:
            code = f.f_code
            if code.co_filename == self.filename:
                return f.f_lineno, called
            if (
                code.co_name not in _WRAPPERS
                and not code.co_name.startswith("<")
                and not code.co_filename.endswith(_PLUMBING)
                and not is_sandbox_file(code.co_filename)
            ):
                called = (
                    code.co_name.removeprefix("_") if code.co_name in _PRIVATE else code.co_name
                )
            f = f.f_back
        return None, called

    @staticmethod
    def _known(table: dict[int, weakref.ref], t: Any) -> bool:
        ref = table.get(id(t))
        return ref is not None and ref() is t
