"""The rows of the ops trace (`Report["ops"]`): each torch call the snippet made, folded with the
others of its line that match it (op, inputs, output, autocast, casts, reason), counted, and capped.

`OpTracer` (`sandbox.explain.ops`) is an `OpRows`: it traces the calls, and records each one here.

Runs in: the runner. Only torch and the standard library are imported.
"""

from __future__ import annotations

from typing import Any, Literal

from sandbox.explain.calls import Call, dtype_name, first_tensor
from sandbox.explain.reasons import reason_for
from sandbox.explain.report import OpRecord, TensorMeta

MAX_INPUTS = 6
"""Inputs kept per op entry; `torch.cat` of a hundred tensors must not blow up the report."""
MAX_CASTS = 4
Described = tuple[str, tuple[int, ...], str | None]
"""(dtype, shape, device) of a tensor (or a Python float), as `calls.describe_inputs` gives it."""
MAX_NAME, MAX_REASON = 280, 1900
"""Below the pool's bounds for an op's name and region words (300) and its reason (2000)."""
MAX_SIGNATURES = 20_000
"""Distinct call signatures remembered for counting once the visible trace is full."""


class OpRows:
    """The recorded rows, at most `max_ops` of them, and the counts past them (`ops_total`,
    `calls_total`, `truncated`); `last_failed`: the last call that raised, and its row."""

    def __init__(self, max_ops: int) -> None:
        self.max_ops = max_ops
        self.ops: list[OpRecord] = []
        self._index: dict[tuple[Any, ...], OpRecord | None] = {}
        self.ops_total = 0
        self.calls_total = 0
        self.truncated = False
        self.last_failed: tuple[BaseException, OpRecord] | None = None

    def _record(self, call: Call, before: Any, out: Any, exc: BaseException | None) -> None:
        inputs, (device, autocast, other) = before
        tensor = first_tensor(out)
        out_desc = (
            (dtype_name(tensor.dtype), tuple(tensor.shape), str(tensor.device))
            if tensor is not None
            else None
        )
        error = None
        if exc is not None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            error = f"{type(exc).__name__}: {first}"[:200]
        reason = reason_for(
            call,
            [d[0] for d in inputs],
            out_desc[0] if out_desc else None,
            autocast,
            other if autocast is None else None,
            device,
            error,
        )
        self.calls_total += 1
        entry = self.add_row(call, inputs, out_desc, autocast, reason, error)
        if exc is not None and entry is not None:
            self.last_failed = (exc, entry)

    def add_row(
        self,
        call: Call,
        inputs: list[Described],
        out_desc: Described | None,
        autocast: tuple[str, str] | None,
        reason: str,
        error: str | None = None,
    ) -> OpRecord | None:
        """Fold a row into the ops (or count it past the cap); the row's entry, if shown."""
        # Names and words can come from the snippet (a function's name in a region, a class's):
        # kept inside the pool's bounds (`sandbox.claims`), so no row drops the whole report.
        reason = reason[:MAX_REASON]
        casts = call.casts
        casts_key = tuple(casts[:MAX_CASTS]) + ((len(casts),) if len(casts) > MAX_CASTS else ())
        reused = tuple(call.reused[:MAX_CASTS])
        key = (call.line, call.name, tuple(inputs), out_desc, autocast, casts_key, reason, reused)
        entry: OpRecord | Literal[False] | None = self._index.get(key, False)
        if entry is False:
            self.ops_total += 1
            entry = None
            if len(self.ops) < self.max_ops:
                entry = {
                    "name": call.name[:MAX_NAME],
                    "line": call.line,
                    "count": 0,
                    "inputs": [_desc_dict(d) for d in inputs[:MAX_INPUTS]],
                    "output": _desc_dict(out_desc) if out_desc else None,
                    "autocast": {"device_type": autocast[0], "dtype": autocast[1]}
                    if autocast
                    else None,
                    "casts": [
                        {"from": c[0], "to": c[1], "shape": list(c[2])} for c in casts[:MAX_CASTS]
                    ],
                    "reason": reason,
                }
                if len(inputs) > MAX_INPUTS:
                    entry["inputs_total"] = len(inputs)
                if len(casts) > MAX_CASTS:
                    entry["casts_total"] = len(casts)
                if error is not None:
                    entry["error"] = error
                if reused:
                    entry["reused"] = [
                        {"dtype": r[0], "shape": list(r[1]), "line": r[2]} for r in reused
                    ]
                if call.region is not None:
                    entry["region"] = {"kind": call.region[0], "text": call.region[1][:MAX_NAME]}
                self.ops.append(entry)
            else:
                self.truncated = True
            if len(self._index) < MAX_SIGNATURES:
                self._index[key] = entry
        if entry is not None:
            entry["count"] += 1
        return entry


def _desc_dict(d: Described) -> TensorMeta:
    return {"dtype": d[0], "shape": list(d[1]), "device": d[2]}
