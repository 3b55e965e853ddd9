"""Autocast's weight-cast cache, followed: which call was handed a cached cast made where, and when
that copy no longer matched its weight.

Inside an autocast region, the lower-precision copy of a float32 leaf that requires grad (a
weight) is made once and cached, keyed on the weight alone, until the outermost region exits
(`cached_cast` in ATen's autocast_mode.cpp; `autocast.__exit__` clears it at nesting level 0). A
cache hit runs no cast at all, so the op trace saw nothing: a second forward pass showed fewer
casts and no reason. Two silent consequences follow, both reported as hazards:

- `stale_cast`: the weight was written in place after its copy was made (an optimizer step inside
  one long region), and a later call computed with the old values;
- `cast_dtype`: a nested region of another dtype was handed the outer region's copy (a float16
  region given the bfloat16 weight), which ends in "mat1 and mat2 must have the same dtype".

How: each cast autocast makes of an eligible tensor (float32, a leaf that requires grad, no view,
the cache on, to the region's dtype) is remembered by its output tensor; an aten op of a later
call given that very tensor was handed it by the cache. Staleness is checked on the values (the
weight cast again and compared with the copy), so a write through `.data` is caught too.

Runs in: the runner (part of the explanation). Only torch and the standard library are imported.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from sandbox.explain.calls import BACKWARD_NAMES, CONVERSIONS, Call, dtype_name
from sandbox.explain.report import HazardKind
from sandbox.explain.unseen import own_dispatch
from sandbox.frames import snippet_line

MAX_COMPARE_NUMEL = 1 << 20
"""Weights larger than this are not cast again to check their cached copy."""
EVERY_REUSE_CHECKED = 16
"""Reuses of one copy checked each time; past them only the 2**k-th (a loop's stays found)."""


@dataclass
class _Copy:
    out: weakref.ref
    source: weakref.ref
    dtype: str
    shape: tuple[int, ...]
    line: int | None
    serial: int
    reuses: int = 0
    flagged: bool = False


AddHazard = Callable[[HazardKind, str, "Call | None", torch.dtype, str], None]
"""`HazardChecker._add`-like: (kind, the op's short name, call, dtype, words)."""


class CastCache:
    """The casts autocast cached (by their output tensor), and who wrote their weights since."""

    def __init__(self, filename: str, add_hazard: AddHazard, pause: Callable[[], Any]):
        """`pause()`: the tracer's, around the checks' own tensor work (unseen by the snippet)."""
        self.filename = filename
        self.add_hazard = add_hazard
        self.pause = pause
        self._copies: dict[int, _Copy] = {}
        self._serial = -1
        self._handed: list[Any] = []
        """The copies handed to the call with `_serial` so far (each counts once per call)."""
        self._writes: dict[int, tuple[weakref.ref, str]] = {}
        """By the source weight's id: who last wrote it in place, in words."""

    @property
    def live(self) -> bool:
        """Whether any cached copy is remembered (the tracer asks before every aten op)."""
        return bool(self._copies)

    def install(self) -> Any:
        """An optimizer step hook that notes which cached weights each step wrote; returns its
        handle (`.remove()` it on exit)."""
        from torch.optim.optimizer import register_optimizer_step_post_hook

        return register_optimizer_step_post_hook(self._stepped)

    def _stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._copies or torch.compiler.is_compiling():
            return
        try:
            line = snippet_line(self.filename)
            on = f" on line {line}" if line is not None else ""
            params = [p for g in optimizer.param_groups for p in g["params"]]
            self.wrote(params, f"{type(optimizer).__name__[:80]}.step(){on}")
        except Exception:  # noqa: BLE001, S110 - a snippet's optimizer may be anything
            pass

    # fed by the op trace's dispatch mode

    def cast(self, src: Any, out: Any, call: Call | None) -> None:
        """A cast ran under `call`: remember it when it is one autocast's cache keeps."""
        if (
            call is None
            or call.autocast is None
            or call.name in CONVERSIONS
            or call.name in BACKWARD_NAMES
            or not isinstance(src, torch.Tensor)
            or not isinstance(out, torch.Tensor)
            or src.dtype != torch.float32
            or not (src.requires_grad and src.is_leaf and not src._is_view())
            or not torch.is_autocast_cache_enabled()
            or dtype_name(out.dtype) != call.autocast[1]
        ):
            return
        if len(self._copies) > 512:
            self._copies = {k: c for k, c in self._copies.items() if c.out() is not None}
            if len(self._copies) > 512:
                return
        self._copies[id(out)] = _Copy(
            weakref.ref(out),
            weakref.ref(src),
            call.autocast[1],
            tuple(src.shape),
            call.snippet_line(self.filename),
            call.serial,
        )

    def handed(self, args: tuple[Any, ...], call: Call | None) -> None:
        """Before an aten op of `call` runs: which of its arguments are cached copies made by
        another call (the backward pass's uses of saved copies are no cache hits). Identity only:
        no tensor is read here, so it runs outside the tracer's pause."""
        if call is None or call.name in BACKWARD_NAMES:
            return
        for a in args:
            copy = self._copies.get(id(a))
            if copy is None or copy.out() is not a or copy.serial == call.serial:
                continue
            assert isinstance(a, torch.Tensor)  # the tensor the copy's weakref holds
            if self._serial != call.serial:
                self._serial, self._handed = call.serial, []
            if any(h is a for h in self._handed):
                continue
            self._handed.append(a)
            if len(call.reused) < 8:
                call.reused.append((copy.dtype, copy.shape, copy.line))
            with self.pause():
                self._check(copy, a, call)

    # fed by the tracer (a snippet's in-place call) and the optimizer step hook

    def wrote(self, tensors: Any, words: str) -> None:
        """`tensors` were written in place by `words` ("SGD.step() on line 12")."""
        if not self._copies:
            return
        sources = {id(c.source()) for c in self._copies.values()}
        for t in tensors:
            if isinstance(t, torch.Tensor) and id(t) in sources:
                self._writes[id(t)] = (weakref.ref(t), words)

    # the two hazards

    def _check(self, copy: _Copy, cached: torch.Tensor, call: Call) -> None:
        copy.reuses += 1
        n = copy.reuses
        if copy.flagged or not (n <= EVERY_REUSE_CHECKED or not n & (n - 1)):
            return
        region = call.autocast[1] if call.autocast is not None else None
        short = call.name.rsplit(".", 1)[-1]
        made = f"line {copy.line}" if copy.line is not None else "an earlier line"
        if copy.line is not None and copy.line == call.line:
            made += " by an earlier call"
        if region is not None and region != copy.dtype:
            copy.flagged = True
            self.add_hazard(
                "cast_dtype",
                short,
                call,
                cached.dtype,
                f"ran in a {region} autocast region but was handed the {copy.dtype} copy of a "
                f"weight that autocast cached on {made}: the cache is keyed on the weight alone, "
                f"not on the dtype, so a nested region of another dtype reuses the outer "
                f"region's copy (its inputs then mix {region} and {copy.dtype}); use "
                "cache_enabled=False on the inner region, or one dtype",
            )
            return
        source = copy.source()
        if (
            source is None
            or own_dispatch(source)
            or own_dispatch(cached)
            or source.numel() > MAX_COMPARE_NUMEL
        ):
            return
        fresh = source.detach().to(cached.dtype)
        if fresh.shape == cached.shape and torch.equal(fresh, cached.detach()):
            return
        copy.flagged = True
        write = self._writes.get(id(source))
        by = f" (by {write[1]})" if write is not None and write[0]() is source else ""
        self.add_hazard(
            "stale_cast",
            short,
            call,
            cached.dtype,
            f"reused autocast's cached {copy.dtype} copy of a weight made on {made}, but the "
            f"weight was changed in place since{by}: this call computed with its old values. "
            "The copy lives until the outermost autocast region exits; enter autocast for each "
            "forward pass, or call torch.clear_autocast_cache() after updating the weights",
        )
