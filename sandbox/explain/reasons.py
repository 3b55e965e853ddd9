"""Why a traced call's output has its dtype, in words, from what was observed around it.

`reason_for` reads a `calls.Call` (its casts, the cached casts it was handed, whether it wrote in
place, the region it ran in) with the inputs' and the output's dtypes and the autocast state. It
reasons from observations, not from a list of ops; the lists appear only to tell autocast's
"promote" ops from its float32 list, which look alike on mixed inputs.

Runs in: the runner (part of the explanation). Only the standard library is imported.
"""

from __future__ import annotations

from sandbox.explain.calls import BACKWARD_NAMES, CONVERSIONS, Call

# Autocast's "promote" ops cast mixed inputs to the widest one; for mixed float16/float32
# inputs that looks exactly like the float32 list, so these names tell the two apart. The lists
# are per device and differ: CUDA's is `AT_FORALL_PROMOTE` in torch's shipped
# `ATen/autocast_mode.h`; the CPU's is registered in `autocast_mode.cpp` (there `grid_sampler`
# is on the float32 list instead). tests/sandbox/explain/test_agrees_with_torch.py checks both
# against torch: the header, and what CPU autocast does.
AUTOCAST_PROMOTE: dict[str, frozenset[str]] = {
    "cpu": frozenset({"cat", "stack", "index_copy"}),
    "cuda": frozenset(
        {
            "addcdiv",
            "addcmul",
            "atan2",
            "bilinear",
            "cross",
            "dot",
            "vdot",
            "grid_sample",
            "grid_sampler",
            "index_put",
            "index_put_",
            "tensordot",
            "scatter_add",
        }
    ),
}

_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def reason_for(
    call: Call,
    in_dtypes: list[str],
    out_dtype: str | None,
    autocast: tuple[str, str] | None,
    other_autocast: tuple[str, str] | None,
    device: str | None,
    error: str | None,
) -> str:
    """Why the output has its dtype, in words: what the call itself did, after where it ran."""
    region = call.region
    if region is not None and region[0] == "custom_fwd_cast" and error is None:
        if call.casts:
            return (
                f"{region[1]} cast this input from {call.casts[0][0]} to {out_dtype}, then ran "
                "the forward with autocast off"
            )
        return f"{region[1]} passed this input on unchanged (already {out_dtype})"
    if region is None:
        return _reason(call, in_dtypes, out_dtype, autocast, other_autocast, device, error, None)
    if region[0] == "custom_fwd" and autocast is None:  # the region is why autocast is off
        return _reason(call, in_dtypes, out_dtype, None, other_autocast, device, error, region[1])
    off = "" if region[0] in ("recompute", "custom_bwd", "backward") else None  # words say it
    base = _reason(call, in_dtypes, out_dtype, autocast, other_autocast, device, error, off)
    return f"{region[1]}: {base}"


def _reason(
    call: Call,
    in_dtypes: list[str],
    out_dtype: str | None,
    autocast: tuple[str, str] | None,
    other_autocast: tuple[str, str] | None,
    device: str | None,
    error: str | None,
    off: str | None,
) -> str:
    name, casts = call.name, call.casts
    if error is not None:
        return f"raised {error}"
    if name in BACKWARD_NAMES:
        if casts:
            return "backward pass: gradients flowed back through the forward pass's casts to the parameters' dtypes"
        return "backward pass: each gradient is computed in its forward op's dtype"
    if out_dtype is None:
        return "returned no tensor"
    floats = [d for d in in_dtypes if d in _FLOAT_RANK]
    if name in CONVERSIONS and casts:
        return f"explicit cast to {out_dtype} ({name.split('.')[-1]}())"
    if not [d for d in in_dtypes if not d.startswith("python")]:
        if autocast is not None:
            return f"new {out_dtype} tensor: autocast does not change tensors that are created"
        return f"new {out_dtype} tensor"
    if out_dtype not in _FLOAT_RANK:
        return f"returns {out_dtype}"
    if call.inplace is not None:
        return _in_place(call.inplace, out_dtype, floats, autocast is not None)
    distinct = sorted(set(floats), key=lambda d: _FLOAT_RANK[d])
    if autocast is not None:
        ac_dtype = autocast[1]
        reused = _reused(call, ac_dtype)
        if out_dtype == ac_dtype and (any(c[1] == ac_dtype for c in casts) or reused):
            return f"cast to {ac_dtype} by autocast{reused}"
        if out_dtype == "float32" and any(c[1] == "float32" for c in casts):
            promote = AUTOCAST_PROMOTE.get(autocast[0], frozenset())
            if name.rsplit(".", 1)[-1] in promote and "float32" in floats:
                return "promoted to the widest input (float32) by autocast"
            return "run in float32 by autocast (it is on autocast's float32 list)"
        if len(distinct) > 1 and out_dtype == distinct[-1]:
            return f"promoted to the widest input ({out_dtype}) under autocast"
        if distinct == [
            "float64"
        ]:  # before "follows its input": autocast passed it over, not the op
            return "its inputs are float64, which autocast never casts: it casts only float32, float16 and bfloat16 ones"
        if distinct == [out_dtype]:
            return f"follows its input ({out_dtype}); autocast did not change it"
        if out_dtype in distinct:  # layer_norm of a bfloat16 input with float32 weights, on the CPU
            return f"keeps its {out_dtype} input's dtype; autocast cast none of its inputs"
        # Autocast cast nothing, and the dtype is none of the inputs': the op chose it (sum's dtype=).
        return f"autocast cast none of its inputs; the op itself made {out_dtype} (as a dtype= argument does)"
    if other_autocast is not None:
        prefix = (
            f"autocast is on for {other_autocast[0]} but this ran on {device}, "
            "so autocast left it alone: "
        )
    else:
        prefix = "" if off == "" else f"{off or 'outside autocast'}: "
    if len(distinct) > 1 and out_dtype == distinct[-1]:
        return prefix + f"promoted to the widest input ({out_dtype})"
    if distinct == [out_dtype]:
        return prefix + f"follows its input ({out_dtype})"
    return prefix + f"returned {out_dtype}"


def _in_place(how: str, out_dtype: str, floats: list[str], under_autocast: bool) -> str:
    """An in-place op (or one given `out=`) keeps the dtype of the tensor it writes into: type
    promotion computes the result and casts it back, and autocast does not cast such ops."""
    target = "its first argument (in place)" if how == "self" else "the out= tensor"
    text = f"wrote into {target}, so the result keeps that tensor's dtype ({out_dtype})"
    others = sorted({d for d in floats if d != out_dtype}, key=lambda d: _FLOAT_RANK[d])
    if others:
        text += f"; the {' and '.join(others)} values were converted to it (no widening)"
    if under_autocast:
        text += "; autocast does not cast in-place or out= ops"
    return text


def _reused(call: Call, ac_dtype: str) -> str:
    """ ", reusing ..." for the casts autocast's cache handed this call, or ""."""
    if not call.reused:
        return ""
    lines = sorted({ln for _, _, ln in call.reused if ln is not None})
    dtypes = sorted({dt for dt, _, _ in call.reused})
    n = len(call.reused)
    where = f" on line {', '.join(map(str, lines))}" if lines else ""
    copies = "copy of an input" if n == 1 else f"copies of {n} inputs"
    dtype_words = "/".join(dtypes) if dtypes != [ac_dtype] else ac_dtype
    return (
        f", reusing the {dtype_words} {copies} that autocast cached{where} (kept until the "
        "outermost autocast region exits)"
    )
