"""torch's own account of a snippet's ops, to check our explanation against.

`reference_snippet(code)` wraps a snippet in torch's `DebugMode` (`torch.utils._debug_mode`, a
TorchDispatchMode that also records `__torch_function__` calls when `record_torchfunction=True`)
and prints, after a marker line, a JSON summary: for every torch-level call the snippet made
itself (directly, or through an `nn.Module` it called), the snippet line, the call's name, its
output dtype, and, when autocast was on for the call's device, the dtype-changing `_to_copy`
casts that ran underneath it. The wrapper runs in the sandbox like any snippet, so nothing
untrusted runs in the test process; `ops_of_reference` and `ops_of_explanation` bring both
accounts to the same shape, `compare` says where they differ.

What is shared with our tracer on purpose: which calls count as the snippet's own (the same
frame rule: plumbing files are transparent, `nn.Module.__call__` keeps a call direct, library
internals do not), the names it never records (`sandbox.explain.calls._SKIP_NAMES`), and the two
places it steps aside (while torch.compile traces, and while the snippet's own profiler runs).
What is not shared: the dtypes and the casts, which come from DebugMode's records of the aten
calls.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from sandbox.explain.calls import _SKIP_NAMES

MARKER = "@@ampquiz-debugmode@@"

# The wrapper's own code lives in a real module (registered in sys.modules): torch.compile inlines
# its `__torch_function__` while tracing a snippet and must be able to find that function's globals
# by module name; a bare exec'd namespace called "__main__" would send it to the runner's main.
_REFERENCE_MODULE = r"""
import os as _os, sys as _sys
import torch as _torch
from torch.utils._debug_mode import DebugMode as _DebugMode
import torch.utils._debug_mode._mode as _dm_mode

# DebugMode's constructor registers an inductor lowering for its own `_annotate` op the first time
# (1.1 s of inductor imports per fresh process); no snippet here uses `_annotate`, so skip it.
_dm_mode._annotate_decorated = True

_BANK = "<bank>"
_TRANSPARENT = (
    "torch/overrides.py", "torch/utils/_python_dispatch.py", "torch/nn/functional.py",
    "torch/functional.py", "torch/_tensor.py", "torch/_jit_internal.py", "torch/utils/_device.py",
    "torch/_tensor_str.py",
)
_CASTS = {
    _torch.ops.aten._to_copy.default, _torch.ops.aten.to.dtype, _torch.ops.aten.to.dtype_layout,
    _torch.ops.aten.to.device, _torch.ops.aten.to.other,
}
_HERE = _sys._getframe(0).f_code.co_filename
SKIP = set()


def _line(frame):
    # The bank snippet's line when the call is the snippet's own, else None.
    in_module = called = False
    f = frame
    while f is not None:
        fn = f.f_code.co_filename
        if fn == _BANK:
            return f.f_lineno if (called or not in_module) else None
        n = fn.replace(_os.sep, "/")
        if (fn == _HERE or n.endswith(_TRANSPARENT) or n.endswith("/contextlib.py")
                or "/torch/utils/_debug_mode/" in n):
            pass
        elif "/torch/nn/modules/" in n:
            in_module = True
            if f.f_code.co_name in ("_call_impl", "_wrapped_call_impl"):
                called = True
        else:
            return None
        f = f.f_back
    return None


def _first(x):
    if isinstance(x, _torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for i in x:
            if isinstance(i, _torch.Tensor):
                return i
    return None


def _device(args, kwargs):
    for v in (*args, *kwargs.values()):
        t = _first(v)
        if t is not None:
            return t.device.type
    return None


def _dt(d):
    return str(d).replace("torch.", "")


class Reference(_DebugMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # as our tracer: record what runs, not what torch.compile traces, and nothing while the
        # snippet's own torch.profiler runs
        if _torch.compiler.is_compiling() or _torch._C._autograd._profiler_enabled():
            return func(*args, **kwargs)
        name = getattr(func, "__name__", None) or repr(func)
        line = _line(_sys._getframe(1)) if name not in SKIP else None
        if line is None:
            return super().__torch_function__(func, types, args, kwargs)
        dev = _device(args, kwargs)
        autocast = any(
            _torch.is_autocast_enabled(d) for d in ("cpu", "cuda") if dev is None or d == dev
        )
        i = len(self.operators)
        meta = {"line": line, "name": name, "autocast": autocast, "out": None}
        try:
            out = super().__torch_function__(func, types, args, kwargs)
        except BaseException:
            meta["error"] = True
            if i < len(self.operators):
                self.operators[i].meta = meta
            raise
        t = _first(out)
        meta["out"] = _dt(t.dtype) if t is not None else None
        if i < len(self.operators):
            self.operators[i].meta = meta
        return out


def cast_hook(func, types, args, kwargs, result):
    if func in _CASTS and args and isinstance(args[0], _torch.Tensor) and isinstance(result, _torch.Tensor):
        if args[0].dtype != result.dtype:
            return {"cast": [_dt(args[0].dtype), _dt(result.dtype), list(args[0].shape)]}
    return None


def summary(mode):
    calls = []
    current = None
    for op in mode.operators:
        meta = getattr(op, "meta", None)
        if op.call_depth == 0:
            current = None
            if meta is not None and (meta["out"] is not None or meta["name"] == "backward" or meta.get("error")):
                current = dict(meta, casts=[])
                calls.append(current)
        elif current is not None and op.call_depth >= 2 and current["autocast"]:
            rec = getattr(op, "record", None) or {}
            if "cast" in rec:
                current["casts"].append(rec["cast"])
    folded = {}
    for c in calls:  # folded by key, as our report folds its ops, so a long loop stays small
        k = (c["line"], c["name"], c["out"], tuple(tuple(x[:2]) + (tuple(x[2]),) for x in c["casts"]) if c["autocast"] else None)
        folded[k] = folded.get(k, 0) + 1
    return [[k[0], k[1], k[2], [[a, b, list(sh)] for a, b, sh in k[3]] if k[3] is not None else None, n]
            for k, n in folded.items()]
"""

_HARNESS = r"""
import json as _json, sys as _sys, types as _types

_ref = _types.ModuleType("_ampquiz_debugmode_reference")
_sys.modules[_ref.__name__] = _ref
exec(compile(__MODULE__, "<ampquiz-debugmode-reference>", "exec"), _ref.__dict__)
_ref.SKIP.update(__SKIP__)

_mode = _ref.Reference(record_torchfunction=True, record_output=False, record_profiler_context=False)
_error = None
with _ref._DebugMode.dispatch_hooks(record_hook=_ref.cast_hook):
    try:
        with _mode:
            exec(compile(__CODE__, "<bank>", "exec"), {"__name__": "__main__"})
    except BaseException as _e:  # the snippet's own exception: the ops before it still count
        _error = type(_e).__name__
_sys.stdout.flush()
print()
print(__MARKER__)
print(_json.dumps({"error": _error, "ops": _ref.summary(_mode)}))
"""


def reference_snippet(code: str) -> str:
    """The snippet wrapped in DebugMode; run it in the sandbox and read it with `ops_of_reference`."""
    return (
        _HARNESS.replace("__MODULE__", repr(_REFERENCE_MODULE))
        .replace("__SKIP__", json.dumps(sorted(_SKIP_NAMES)))
        .replace("__MARKER__", json.dumps(MARKER))
        .replace("__CODE__", json.dumps(code))
    )


UNSEEN_BY_DEBUGMODE = frozenset(
    {"custom_fwd_cast", "recompute", "custom_bwd", "backward", "compiled"}
)
"""Rows of ours that DebugMode's own record has no row for: what the backward pass ran of the
snippet's code (its casts are the backward row's in both accounts), custom_fwd's casts of its
inputs (made by torch's code, which DebugMode counts as no call of the snippet's), and what a
torch.compile graph computes (read from the graph, not traced as it runs)."""

Key = tuple[int, str, str | None, tuple[tuple[str, str, tuple[int, ...]], ...] | None]
"""(snippet line, call name, output dtype, casts autocast inserted, or None outside autocast)."""


def ops_of_reference(stdout: str) -> tuple[Counter[Key], dict[str, Any]]:
    """DebugMode's calls, counted by `Key`, from the wrapped snippet's output."""
    _, sep, tail = stdout.rpartition(MARKER)
    assert sep, f"the DebugMode wrapper printed no summary:\n{stdout[-2000:]}"
    data = json.loads(tail.strip().splitlines()[0])
    counts: Counter[Key] = Counter()
    for line, name, out, casts, n in data["ops"]:
        cast_key = tuple((c[0], c[1], tuple(c[2])) for c in casts) if casts is not None else None
        counts[(line, _short(name), out, cast_key)] += n
    return counts, data


def ops_of_explanation(report: dict[str, Any]) -> Counter[Key]:
    """Our tracer's ops (`report["ops"]`, folded with counts), counted by the same `Key`."""
    assert not report.get("ops_truncated"), "the explanation's op list was truncated"
    counts: Counter[Key] = Counter()
    for op in report["ops"]:
        if (op.get("region") or {}).get("kind") in UNSEEN_BY_DEBUGMODE:
            continue
        out = op["output"]["dtype"] if op.get("output") else None
        casts = None
        if op.get("autocast") is not None:
            casts = tuple((c["from"], c["to"], tuple(c["shape"])) for c in op["casts"])
            if op.get("casts_total", len(op["casts"])) != len(op["casts"]):
                casts += (("…", str(op["casts_total"]), ()),)
        counts[(op["line"], _short(op["name"]), out, casts)] += op["count"]
    return counts


def truncate_casts(counts: Counter[Key], keep: int = 4) -> Counter[Key]:
    """The reference's casts cut as our report cuts them (first `keep`, then the total)."""
    out: Counter[Key] = Counter()
    for (line, name, dtype, casts), n in counts.items():
        if casts is not None and len(casts) > keep:
            casts = casts[:keep] + (("…", str(len(casts)), ()),)
        out[(line, name, dtype, casts)] += n
    return out


def compare(ours: Counter[Key], theirs: Counter[Key]) -> list[str]:
    """Every difference between the two accounts, one line each (empty when they agree)."""
    problems = []
    for key in sorted(set(ours) | set(theirs), key=repr):
        if ours[key] != theirs[key]:
            line, name, dtype, casts = key
            problems.append(
                f"line {line} {name} -> {dtype} casts={list(casts) if casts is not None else '-'}: "
                f"explanation x{ours[key]}, DebugMode x{theirs[key]}"
            )
    return problems


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]
