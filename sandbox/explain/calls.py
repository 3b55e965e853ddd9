"""What one torch call is, for `sandbox.explain`: its user-level name, the snippet line it came
from, the autocast state it ran under, and why its output has the dtype it has.

Runs in: the runner. Pure helpers with no state of their own beyond caches; the tracer in
`sandbox.explain.ops` uses them. Only torch and the standard library are imported.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch

from sandbox.explain.report import RegionKind
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
    """(snippet line, made directly by the snippet?, the snippet's frame when the line was found,
    else the frame to resume from when the line is wanted).

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
            return f.f_lineno, (called or not in_module), f
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


_SERIALS = itertools.count()


@dataclass
class Call:
    """A torch-function call in progress; the dispatch mode adds what happens underneath."""

    name: str
    line: int | None
    direct: bool
    frame: FrameType | None = None
    casts: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)
    autocast: tuple[str, str] | None = None
    """(device type, dtype) of autocast on the inputs' device when a direct call was made."""
    reused: list[tuple[str, tuple[int, ...], int | None]] = field(default_factory=list)
    """Autocast's cached casts this call was handed: (dtype, shape, line the cast was made on)."""
    inplace: str | None = None
    """"self" when it wrote its result into its first argument, "out" into an `out=` tensor."""
    region: tuple[RegionKind, str] | None = None
    """(kind, words) of what it ran inside: `sandbox.explain.regions`."""
    serial: int = field(default_factory=lambda: next(_SERIALS))

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


def wrote_into(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> str | None:
    """ "self" when the call wrote its result into its first argument (`add_`, `+=`, `copy_`),
    "out" into its `out=` tensor, else None. Only identity is read: no tensor op."""
    if (
        args
        and out is args[0]
        and (name.endswith("_") and not name.endswith("__") or name.startswith("Tensor.__i"))
    ):
        return "self"
    target = kwargs.get("out")
    if target is not None and (
        out is target or isinstance(target, (list, tuple)) and out is target[0]
    ):
        return "out"
    return None
