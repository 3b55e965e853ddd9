"""Numeric hazards of float16/bfloat16, spotted on the aten ops a snippet runs.

Checks run only on low-precision outputs and stay cheap: one `isfinite` reduction per output, and
a float32 re-computation of the op only when something looks wrong (a non-finite value from finite
inputs, or zeros that may be underflow). Comparing with float32 tells overflow from a legitimate
inf (division by zero gives inf in float32 too) and underflow from a legitimate zero (relu).

Runs in: the runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from sandbox.explain.calls import LOW_PRECISION, Call, dtype_name, first_tensor
from sandbox.explain.report import Hazard, HazardKind

MAX_CHECK_NUMEL = 1 << 22
"""Larger outputs are not checked at all."""
MAX_COMPARE_NUMEL = 1 << 18
"""Larger outputs get the cheap overflow check only (no snapshots, no zero or absorption checks)."""
MAX_HAZARDS = 50
UNDERFLOW_CLEAN_LIMIT = 8
"""After this many outputs with zeros but no underflow for one op, stop re-checking that op."""

_SKIP, _GENERIC, _ADD, _SUB = 0, 1, 2, 3
_SKIP_PACKETS = frozenset(
    {
        "detach",
        "clone",
        "lift_fresh",
        "lift_fresh_copy",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "zero_",
        "ones",
        "ones_like",
        "new_ones",
        "alias",
        "_unsafe_view",
        "set_",
        "resize_",
        "as_strided",
        "fill_",
        "_local_scalar_dense",
        "copy",
        "_has_compatible_shallow_copy_type",
        "isfinite",
        "isinf",
        "isnan",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    }
)
_KINDS: dict[Any, int] = {}


def _kind(func: Any) -> int:
    kind = _KINDS.get(func)
    if kind is None:
        packet = func.overloadpacket.__name__
        if (
            getattr(func, "is_view", False)
            or packet in _SKIP_PACKETS
            or torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
        ):
            kind = _SKIP
        elif packet in ("add", "add_"):
            kind = _ADD
        elif packet in ("sub", "sub_"):
            kind = _SUB
        else:
            kind = _GENERIC
        _KINDS[func] = kind
    return kind


def _writes_another_argument(func: Any) -> bool:
    """Whether the op writes to an argument other than its first (batch norm's running mean and
    variance, a fused optimizer's states, an `out=`): re-run to compare, it wrote them a second
    time, and a snippet under the explainer printed running statistics updated twice."""
    try:
        # `native_batch_norm` writes them undeclared in its schema.
        if "batch_norm" in func._schema.name:
            return True
        return any(
            a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments[1:]
        )
    except Exception:  # noqa: BLE001 - no schema to read: never re-run it
        return True


def _mutates_self(func: Any) -> bool:
    try:
        args = func._schema.arguments
        return bool(args) and args[0].alias_info is not None and args[0].alias_info.is_write
    except Exception:  # noqa: BLE001
        return func.overloadpacket.__name__.endswith("_")


_CREATORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray", "torch.scalar_tensor"})


def _smallest(dt: torch.dtype) -> float:
    """Smallest positive (subnormal) value of a floating dtype."""
    return torch.finfo(dt).smallest_normal * torch.finfo(dt).eps


def _fmt(x: float) -> str:
    """Whole numbers in full (65504, 65536), others with four significant digits."""
    if math.isfinite(x) and abs(x) < 1e7 and float(x).is_integer():
        return str(int(x))
    return f"{x:.4g}"


class HazardChecker:
    """Collects overflow, underflow and absorption findings, folded by (kind, line, op)."""

    def __init__(self, line_of: Callable[[Call | None], int | None]) -> None:
        self.line_of = line_of
        self.hazards: list[Hazard] = []
        self._index: dict[tuple[Any, ...], Hazard] = {}
        self.truncated = False
        self._clean: dict[tuple[Any, ...], int] = {}
        self._mutating: dict[Any, bool] = {}

    # hooks called by the tracer

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Snapshot `self` of an in-place low-precision op, so its old value can be compared."""
        mut = self._mutating.get(func)
        if mut is None:
            mut = self._mutating[func] = _mutates_self(func) and _kind(func) != _SKIP
        if not mut or not args or not isinstance(args[0], torch.Tensor):
            return None
        t = args[0]
        if t.dtype not in LOW_PRECISION or t.numel() > MAX_COMPARE_NUMEL:
            return None
        return t.detach().clone()

    def after(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
        snapshot: Any,
        call: Call | None,
    ) -> None:
        out_t = out if isinstance(out, torch.Tensor) else first_tensor(out)
        if out_t is None or out_t.dtype not in LOW_PRECISION:
            return
        kind = _kind(func)
        if kind == _SKIP or "out" in kwargs:
            return
        n = out_t.numel()
        if n == 0 or n > MAX_CHECK_NUMEL:
            return
        # (no detach needed: below the autograd key these tensors carry no graph)
        # one reduction answers both questions: max |x| is inf/NaN iff some value is not finite,
        # min |x| is 0 iff some value is zero (aminmax propagates NaN)
        smallest, largest = (float(v) for v in torch.aminmax(out_t.abs()))
        if not math.isfinite(largest):
            self._check_overflow(func, args, kwargs, out_t, snapshot, call)
            return
        if n > MAX_COMPARE_NUMEL:
            return
        if kind in (_ADD, _SUB):
            self._check_absorption(func, args, kwargs, out_t, snapshot, call, kind)
        if smallest == 0.0:
            self._check_underflow(func, args, kwargs, out_t, snapshot, call)

    def after_function(
        self, call: Call, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> None:
        """`torch.tensor(70000., dtype=torch.float16)` converts in C++ before any aten op runs,
        so values that do not fit are caught here, by building the same tensor in float32."""
        if call.name not in _CREATORS or not isinstance(out, torch.Tensor):
            return
        dt = out.dtype
        if dt not in LOW_PRECISION or out.numel() == 0 or out.numel() > MAX_COMPARE_NUMEL:
            return
        ref = func(*args, **{**kwargs, "dtype": torch.float32})
        if not isinstance(ref, torch.Tensor) or ref.shape != out.shape:
            return
        out32 = out.detach().float()
        ref = ref.detach().float()
        over = ~torch.isfinite(out32) & torch.isfinite(ref)
        count = int(over.sum())
        if count:
            example = float(ref[over].flatten()[0])
            self.add(
                "overflow",
                "tensor",
                call,
                dt,
                f"overflowed in {dtype_name(dt)}: {count} of {out.numel()} values are too large "
                f"for {dtype_name(dt)} and became inf (e.g. {_fmt(example)}; {dtype_name(dt)} max "
                f"is {_fmt(torch.finfo(dt).max)})",
            )
        under = (out32 == 0) & (ref != 0)
        count = int(under.sum())
        if count:
            example = float(ref[under].flatten()[0])
            self.add(
                "underflow",
                "tensor",
                call,
                dt,
                f"underflowed in {dtype_name(dt)}: {count} of {out.numel()} non-zero values "
                f"became exactly 0 (e.g. {_fmt(example)} -> 0; the smallest {dtype_name(dt)} is "
                f"{_fmt(_smallest(dt))})",
            )

    # the checks

    def _check_overflow(self, func, args, kwargs, out, snapshot, call) -> None:
        for i, t in enumerate(_tensor_args(args, kwargs)):
            src = snapshot if (i == 0 and snapshot is not None) else t
            if src.is_floating_point() and not bool(torch.isfinite(src).all()):
                return  # inf/NaN came in; not born here
        for v in (*args, *kwargs.values()):
            if isinstance(v, float) and not math.isfinite(v):
                return
        ref = _recompute(func, args, kwargs, snapshot, out)
        if ref is None:
            return
        mask = ~torch.isfinite(out) & torch.isfinite(ref)
        count = int(mask.sum())
        if not count:
            return
        dt = out.dtype
        biggest = float(ref[mask].abs().max())
        self.add(
            "overflow",
            func,
            call,
            dt,
            f"overflowed in {dtype_name(dt)}: finite inputs gave inf/NaN in {count} of "
            f"{out.numel()} values (float32 gives up to {_fmt(biggest)}; "
            f"{dtype_name(dt)} max is {_fmt(torch.finfo(dt).max)})",
        )

    def _check_underflow(self, func, args, kwargs, out, snapshot, call) -> None:
        key = (func, call.name if call else None, call.line if call else None)
        if self._clean.get(key, 0) >= UNDERFLOW_CLEAN_LIMIT:
            return
        ref = _recompute(func, args, kwargs, snapshot, out)
        if ref is None:
            self._clean[key] = UNDERFLOW_CLEAN_LIMIT
            return
        mask = (out == 0) & (ref != 0) & torch.isfinite(ref)
        count = int(mask.sum())
        if not count:
            self._clean[key] = self._clean.get(key, 0) + 1
            return
        dt = out.dtype
        example = float(ref[mask].flatten()[0])
        tiny = _smallest(dt)
        self.add(
            "underflow",
            func,
            call,
            dt,
            f"underflowed in {dtype_name(dt)}: {count} of {out.numel()} non-zero values became "
            f"exactly 0 (e.g. {_fmt(example)} -> 0; the smallest {dtype_name(dt)} is "
            f"{_fmt(tiny)})",
        )

    def _check_absorption(self, func, args, kwargs, out, snapshot, call, kind) -> None:
        if len(args) < 2:
            return
        a = snapshot if snapshot is not None else args[0]
        b = args[1]
        if not isinstance(a, torch.Tensor) or not a.is_floating_point():
            return
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        if isinstance(alpha, torch.Tensor) or alpha == 0:
            return
        a32 = a.detach().float()
        b32 = b.detach().float() if isinstance(b, torch.Tensor) else torch.tensor(float(b))
        if not b32.is_floating_point():
            b32 = b32.float()
        step = b32 * alpha
        ref = a32 + step if kind == _ADD else a32 - step
        out32 = out.float()
        # the result kept the larger input's value although float32 says it should have moved
        pairs = [(a32, step)] + ([(step, a32)] if kind == _ADD else [])
        for big, _small in pairs:
            mask = (out32 == big) & (ref != big) & torch.isfinite(big) & (big != 0)
            count = int(mask.sum())
            if count:
                break
        else:
            return
        dt = out.dtype
        idx = mask.flatten().nonzero()[0, 0]
        a_ex = float(big.expand_as(mask).flatten()[idx])
        b_ex = float(ref.expand_as(mask).flatten()[idx]) - a_ex
        sign = "+" if b_ex >= 0 else "-"
        spacing = torch.finfo(dt).eps * abs(a_ex)
        self.add(
            "absorption",
            func,
            call,
            dt,
            f"lost the smaller operand in {dtype_name(dt)} (absorption): {count} of {out.numel()} values "
            f"stayed equal to the larger input (e.g. {_fmt(a_ex)} {sign} {_fmt(abs(b_ex))} = "
            f"{_fmt(a_ex)}, because {dtype_name(dt)} values near {_fmt(abs(a_ex))} are "
            f"{_fmt(spacing)} apart)",
        )

    # bookkeeping

    def add(
        self, kind: HazardKind, func: Any, call: Call | None, dt: torch.dtype, text: str
    ) -> None:
        line = self.line_of(call)
        aten = func if isinstance(func, str) else func.overloadpacket.__name__
        op = call.name if call is not None else f"aten.{aten}"
        key = (kind, line, op, aten)
        entry = self._index.get(key)
        if entry is not None:
            entry["count"] += 1
            return
        if len(self.hazards) >= MAX_HAZARDS:
            self.truncated = True
            return
        where = f" on line {line}" if line is not None else ""
        inside = "" if op.split(".")[-1].strip("_") == aten.strip("_") else f" (aten.{aten})"
        entry = {
            "kind": kind,
            "line": line,
            "op": op,
            "aten": aten,
            "dtype": dtype_name(dt),
            "count": 1,
            "message": f"{op}{inside}{where} {text}.",
        }
        self._index[key] = entry
        self.hazards.append(entry)


def _tensor_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    found = []
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, torch.Tensor))
    return found


def _up(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().float() if x.dtype in LOW_PRECISION else x.detach()
    if isinstance(x, (list, tuple)):
        return type(x)(_up(v) for v in x) if not hasattr(x, "_fields") else x
    return x


def _recompute(func, args, kwargs, snapshot, out: torch.Tensor) -> torch.Tensor | None:
    """The same aten op with low-precision tensors widened to float32; None if that fails."""
    if _writes_another_argument(func):
        return None
    try:
        new_args = [torch.float32 if a in LOW_PRECISION else _up(a) for a in args]
        if snapshot is not None and new_args:
            new_args[0] = snapshot.float()
        elif _mutates_self(func):
            return None  # self was overwritten (or is the snippet's own float32 tensor)
        new_kwargs = {
            k: (torch.float32 if (k == "dtype" and v in LOW_PRECISION) else _up(v))
            for k, v in kwargs.items()
        }
        res = first_tensor(func(*new_args, **new_kwargs))
    except Exception:  # noqa: BLE001
        return None
    if res is None or res.shape != out.shape or not res.is_floating_point():
        return None
    return res.float()
