"""What one torch call is, for `sandbox.explain`: its user-level name, the snippet line it came
from, the autocast state it ran under, and why its output has the dtype it has.

Runs in: the runner. Pure helpers with no state of their own beyond caches; the tracer in
`sandbox.explain.ops` uses them. Only torch and the standard library are imported.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch

from sandbox.frames import is_sandbox_file, snippet_line

LOW_PRECISION: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)

# Calls that never explain anything about precision: metadata, printing, property access.
_SKIP_NAMES = frozenset(
    {
        "__get__",
        "__set__",
        "__delete__",
        "__repr__",
        "__str__",
        "__format__",
        "__len__",
        "__iter__",
        "__hash__",
        "__bool__",
        "__index__",
        "__int__",
        "__float__",
        "__reduce_ex__",
        "__deepcopy__",
        "__setstate__",
        "__array__",
        "size",
        "dim",
        "numel",
        "item",
        "tolist",
        "is_floating_point",
        "is_complex",
        "data_ptr",
        "element_size",
        "nelement",
        "ndimension",
        "stride",
        "storage_offset",
        "is_contiguous",
        "requires_grad_",
        "retain_grad",
        "register_hook",
        "_is_view",
        "get_device",
        "untyped_storage",
        "numpy",
    }
)
CONVERSIONS = frozenset(
    {
        "Tensor.half",
        "Tensor.float",
        "Tensor.double",
        "Tensor.bfloat16",
        "Tensor.to",
        "Tensor.type",
        "Tensor.type_as",
        "Tensor.cuda",
        "Tensor.cpu",
    }
)
BACKWARD_NAMES = frozenset({"Tensor.backward", "torch.autograd.backward"})

_MODULE_PREFIXES = {
    "torch._C._nn": "torch.nn.functional",
    "torch._C._linalg": "torch.linalg",
    "torch._C._special": "torch.special",
    "torch._C._fft": "torch.fft",
    "torch._C._VariableFunctions": "torch",
    "torch._tensor": "Tensor",
}


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.float16` -> `float16`, the spelling a learner types after `torch.`."""
    return str(dtype).removeprefix("torch.")


NAMES: dict[Any, str | None] = {}


def op_name(func: Callable[..., Any]) -> str | None:
    """User-level name of a torch function, or None for calls the trace ignores."""
    try:
        return NAMES[func]
    except (KeyError, TypeError):
        pass
    name = getattr(func, "__name__", None) or repr(func)
    qual = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", None)
    result: str | None
    if name in _SKIP_NAMES:
        result = None
    elif qual.startswith(("TensorBase.", "Tensor.")):
        result = "Tensor." + name
    elif qual.startswith("_VariableFunctionsClass."):
        result = "torch." + name
    elif module in _MODULE_PREFIXES:
        result = f"{_MODULE_PREFIXES[module]}.{name}"
    elif module:
        result = f"{module}.{name}"
    else:
        result = name
    try:
        NAMES[func] = result
    except TypeError:
        pass
    return result


# --- where a call came from -------------------------------------------------------------------

_TRANSPARENT, _MODULE, _INTERNAL = 0, 1, 2
_TRANSPARENT_TORCH = (
    "torch/overrides.py",
    "torch/utils/_python_dispatch.py",
    "torch/nn/functional.py",
    "torch/functional.py",
    "torch/_tensor.py",
    "torch/_jit_internal.py",
    "torch/utils/_device.py",
    "torch/_tensor_str.py",
)
_CLASSES: dict[str, int] = {}


def _classify(filename: str) -> int:
    """How a frame's file relates to the snippet: plumbing, nn.Module code, or library internals.

    The sandbox's own files (the explainer's wrappers around GradScaler, its modes; anything
    under the `sandbox` package folder, subpackages included) are plumbing: they never hide the
    snippet line of a call made through them.
    """
    kind = _CLASSES.get(filename)
    if kind is not None:
        return kind
    norm = filename.replace(os.sep, "/")
    if (
        norm.endswith(_TRANSPARENT_TORCH)
        or norm == contextlib.__file__.replace(os.sep, "/")
        or is_sandbox_file(filename)
    ):
        kind = _TRANSPARENT
    elif "torch/nn/modules/" in norm:
        kind = _MODULE
    else:
        kind = _INTERNAL
    _CLASSES[filename] = kind
    return kind


def locate(filename: str, frame: FrameType | None) -> tuple[int | None, bool, FrameType | None]:
    """(snippet line, made directly by the snippet?, frame to resume from when the line is wanted).

    A call is "direct" when only plumbing (overrides, `torch.nn.functional` wrappers) or an
    `nn.Module.__call__` lies between it and the snippet, so `model(x)` shows up as
    `torch.nn.functional.linear` on the snippet's line, while optimizer, GradScaler and
    `nn.Linear.__init__` internals do not. For internal calls the line is left for later.
    """
    in_module = called = False
    f = frame
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        if fn == filename:
            return f.f_lineno, (called or not in_module), None
        kind = _classify(fn)
        if kind == _INTERNAL:
            return None, False, f
        if kind == _MODULE:
            in_module = True
            if code.co_name in ("_call_impl", "_wrapped_call_impl"):
                called = True
        f = f.f_back
    return None, False, None


# --- autocast state ---------------------------------------------------------------------------


def autocast_state(device_type: str) -> tuple[bool, torch.dtype | None]:
    """Whether autocast is on for `device_type` and its dtype; works on torch 2.3 and newer."""
    try:
        on = bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4: no device argument
        on = bool(
            torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()
        )
    if not on:
        return False, None
    try:
        return True, torch.get_autocast_dtype(device_type)
    except AttributeError:
        if device_type == "cpu":
            return True, torch.get_autocast_cpu_dtype()
        return True, torch.get_autocast_gpu_dtype()


# --- one traced call --------------------------------------------------------------------------


@dataclass
class Call:
    """A torch-function call in progress; the dispatch mode adds what happens underneath."""

    name: str
    line: int | None
    direct: bool
    frame: FrameType | None = None
    casts: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)

    def snippet_line(self, filename: str) -> int | None:
        if self.line is None and self.frame is not None:
            self.line = snippet_line(filename, self.frame)
            self.frame = None
        return self.line


def _describe(x: Any) -> tuple[str, tuple[int, ...], str | None] | None:
    if isinstance(x, torch.Tensor):
        return dtype_name(x.dtype), tuple(x.shape), str(x.device)
    if isinstance(x, bool):
        return None
    if isinstance(x, float):
        return "python float", (), None
    return None  # Python ints are mostly sizes and dims; they never change a float dtype


def describe_inputs(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, tuple[int, ...], str | None]]:
    found: list[tuple[str, tuple[int, ...], str | None]] = []
    for value in (*args, *kwargs.values()):
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            d = _describe(item)
            if d is not None:
                found.append(d)
    return found


def first_tensor(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (list, tuple)):
        for item in out:
            if isinstance(item, torch.Tensor):
                return item
    return None


def tensors_in(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[torch.Tensor]:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item


def involves_low_precision(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Does the call involve float16/bfloat16 (a tensor, or a dtype it converts to)?"""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            if value.dtype in LOW_PRECISION:
                return True
        elif isinstance(value, torch.dtype):
            if value in LOW_PRECISION:
                return True
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor) and item.dtype in LOW_PRECISION:
                    return True
    return False


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
    name: str,
    in_dtypes: list[str],
    out_dtype: str | None,
    autocast: tuple[str, str] | None,
    other_autocast: tuple[str, str] | None,
    device: str | None,
    casts: list[tuple[str, str, tuple[int, ...]]],
    error: str | None,
) -> str:
    """Why the output has its dtype, in words, from what was observed (not from a list of ops)."""
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
    distinct = sorted(set(floats), key=lambda d: _FLOAT_RANK[d])
    if autocast is not None:
        ac_dtype = autocast[1]
        if out_dtype == ac_dtype and any(c[1] == ac_dtype for c in casts):
            return f"cast to {ac_dtype} by autocast"
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
        prefix = "outside autocast: "
    if len(distinct) > 1 and out_dtype == distinct[-1]:
        return prefix + f"promoted to the widest input ({out_dtype})"
    if distinct == [out_dtype]:
        return prefix + f"follows its input ({out_dtype})"
    return prefix + f"returned {out_dtype}"
