"""What an optimizer that unscales by itself did in a step GradScaler called with inf/NaN gradients.

An optimizer with `_step_supports_amp_scaling` (torch's `fused=True` Adam, AdamW, SGD and Adagrad,
or a custom one) is not skipped by `GradScaler.step`: the scaler checks the gradients, sets
`optimizer.grad_scale` and `optimizer.found_inf`, and always calls `optimizer.step()`; the fused
kernel unscales the gradients itself and, with `found_inf` set, leaves the parameters and moments
as they were (and undoes its step count), while the state it needed is created all the same
(torch/amp/grad_scaler.py, `GradScaler.step`; torch/optim/adam.py, `_fused_adam`). The probe
observes that rather than assuming it: around such a step it compares the parameters and any
existing state with copies taken before, and counts the parameters whose state was created.

Runs in: the runner (part of the explanation). Only torch and the standard library are imported.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox.explain.unseen import own_dispatch

MAX_SNAPSHOT_NUMEL = 1 << 22
"""Values copied at most per step to compare; past it the step is described but not compared."""


def handles_scaling(optimizer: Any) -> bool:
    """Whether `GradScaler.step` leaves the unscaling and the skipping to this optimizer."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))


def _tensors(state: Any) -> list[tuple[str, torch.Tensor]]:
    if not isinstance(state, dict):
        return []
    return [(str(k), v) for k, v in state.items() if isinstance(v, torch.Tensor)]


class FusedStepProbe:
    """`before(opt)` in the optimizer's step pre-hook (inside `scaler.step`), `after(opt)` in its
    post-hook; `result(opt)` then says what the step did, for the scaler's step event."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[bool, Any]] = {}
        self._results: dict[int, dict[str, Any]] = {}

    def before(self, optimizer: Any) -> None:
        found = getattr(optimizer, "found_inf", None)
        if not isinstance(found, torch.Tensor) or own_dispatch(found):
            return
        inf = bool(found.detach().ne(0).any())
        snapshot = self._snapshot(optimizer) if inf else None
        self._pending[id(optimizer)] = (inf, snapshot)

    def _snapshot(self, optimizer: Any) -> Any:
        params = [
            p for g in optimizer.param_groups for p in g["params"] if isinstance(p, torch.Tensor)
        ]
        state = {id(p): _tensors(optimizer.state.get(p)) for p in params}
        numel = sum(p.numel() for p in params) + sum(
            t.numel() for ts in state.values() for _, t in ts
        )
        if numel > MAX_SNAPSHOT_NUMEL or any(own_dispatch(p) for p in params):
            return None  # a tensor subclass of the snippet's would see the copies being made
        return [
            (p, p.detach().clone(), {k: t.detach().clone() for k, t in state[id(p)]})
            for p in params
        ]

    def after(self, optimizer: Any) -> None:
        pending = self._pending.pop(id(optimizer), None)
        if pending is None:
            return
        inf, snapshot = pending
        result: dict[str, Any] = {"found_inf": inf}
        if inf and snapshot is not None:
            unchanged, created = True, 0
            for p, before, old_state in snapshot:
                if not torch.equal(p.detach(), before):
                    unchanged = False
                now = dict(_tensors(optimizer.state.get(p)))
                if now and not old_state:
                    created += 1
                    # new state left as the kernel found it: moments and step count all zero
                    unchanged = unchanged and all(not bool(t.ne(0).any()) for t in now.values())
                else:
                    unchanged = unchanged and all(
                        k in now and torch.equal(now[k], t) for k, t in old_state.items()
                    )
            result["unchanged"] = unchanged
            result["state_created"] = created
        self._results[id(optimizer)] = result

    def result(self, optimizer: Any) -> dict[str, Any] | None:
        return self._results.pop(id(optimizer), None)
