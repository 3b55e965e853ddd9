"""Op tracing for `sandbox.explain`: which torch calls a snippet line made, in which dtypes, and why.

Two modes work together. A `TorchFunctionMode` sees user-level calls (`torch.nn.functional.linear`,
`Tensor.sum`) with the frame that made them; a `TorchDispatchMode` sees the aten ops underneath,
including the `aten._to_copy` casts that autocast inserts (the autocast dispatch key runs before the
Python dispatch key, so those casts reach the mode). Only torch and the standard library are imported.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

LOW_PRECISION: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)
MAX_INPUTS = 6
"""Inputs kept per op entry; `torch.cat` of a hundred tensors must not blow up the report."""
MAX_CASTS = 4
MAX_SIGNATURES = 20_000
"""Distinct call signatures remembered for counting once the visible trace is full."""

_TO_COPY = torch.ops.aten._to_copy.default

# Calls that never explain anything about precision: metadata, printing, property access.
_SKIP_NAMES = frozenset(
    {
        "__get__", "__set__", "__delete__", "__repr__", "__str__", "__format__", "__len__",
        "__iter__", "__hash__", "__bool__", "__index__", "__int__", "__float__", "__reduce_ex__",
        "__deepcopy__", "__setstate__", "__array__", "size", "dim", "numel", "item", "tolist",
        "is_floating_point", "is_complex", "data_ptr", "element_size", "nelement", "ndimension",
        "stride", "storage_offset", "is_contiguous", "requires_grad_", "retain_grad",
        "register_hook", "_is_view", "get_device", "untyped_storage", "numpy",
    }
)
_CONVERSIONS = frozenset(
    {"Tensor.half", "Tensor.float", "Tensor.double", "Tensor.bfloat16", "Tensor.to",
     "Tensor.type", "Tensor.type_as", "Tensor.cuda", "Tensor.cpu"}
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


_NAMES: dict[Any, str | None] = {}


def op_name(func: Callable[..., Any]) -> str | None:
    """User-level name of a torch function, or None for calls the trace ignores."""
    try:
        return _NAMES[func]
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
        _NAMES[func] = result
    except TypeError:
        pass
    return result


# --- where a call came from -------------------------------------------------------------------

_TRANSPARENT, _MODULE, _INTERNAL = 0, 1, 2
_TRANSPARENT_TORCH = (
    "torch/overrides.py", "torch/utils/_python_dispatch.py", "torch/nn/functional.py",
    "torch/functional.py", "torch/_tensor.py", "torch/_jit_internal.py", "torch/utils/_device.py",
    "torch/_tensor_str.py",
)
_HERE = os.path.dirname(os.path.abspath(__file__))
_CLASSES: dict[str, int] = {}


def _classify(filename: str) -> int:
    """How a frame's file relates to the snippet: plumbing, nn.Module code, or library internals."""
    kind = _CLASSES.get(filename)
    if kind is not None:
        return kind
    norm = filename.replace(os.sep, "/")
    if norm.endswith(_TRANSPARENT_TORCH) or norm == contextlib.__file__.replace(os.sep, "/"):
        kind = _TRANSPARENT
    elif os.path.dirname(os.path.abspath(filename)) == _HERE and os.path.basename(
        filename
    ).startswith("explain"):
        kind = _TRANSPARENT
    elif "torch/nn/modules/" in norm:
        kind = _MODULE
    else:
        kind = _INTERNAL
    _CLASSES[filename] = kind
    return kind


def snippet_line(filename: str, frame: FrameType | None = None) -> int | None:
    """Line of the innermost frame that belongs to the snippet, walking outwards from `frame`."""
    f = frame if frame is not None else sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename == filename:
            return f.f_lineno
        f = f.f_back
    return None


def traceback_line(exc: BaseException, filename: str) -> int | None:
    """Innermost snippet line in an exception's traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _locate(filename: str, frame: FrameType | None) -> tuple[int | None, bool, FrameType | None]:
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


def _inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, tuple[int, ...], str | None]]:
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


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[torch.Tensor]:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item


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
            return "backward pass: gradients flowed back through autocast's casts to the parameters' dtypes"
        return "backward pass: each gradient is computed in its forward op's dtype"
    if out_dtype is None:
        return "returned no tensor"
    floats = [d for d in in_dtypes if d in _FLOAT_RANK]
    if name in _CONVERSIONS and casts:
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
            return "run in float32 by autocast (it is on autocast's float32 list)"
        if len(distinct) > 1 and out_dtype == distinct[-1]:
            return f"promoted to the widest input ({out_dtype}) under autocast"
        if distinct == [out_dtype]:
            return f"follows its input ({out_dtype}); autocast did not change it"
        return f"returned {out_dtype} under autocast"
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


# --- the tracer -------------------------------------------------------------------------------


class _FunctionMode(TorchFunctionMode):
    def __init__(self, tracer: "OpTracer") -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        return self.tracer.on_function(func, args, kwargs or {})


class _DispatchMode(TorchDispatchMode):
    def __init__(self, tracer: "OpTracer") -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        return self.tracer.on_dispatch(func, args, kwargs or {})


DispatchHook = Callable[[Any, tuple[Any, ...], dict[str, Any], Any, Any, "Call | None"], None]
PreHook = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


class OpTracer:
    """Records user-level torch calls, folded by (line, op, signature), capped at `max_ops` rows."""

    def __init__(self, filename: str, max_ops: int) -> None:
        self.filename = filename
        self.max_ops = max_ops
        self.ops: list[dict[str, Any]] = []
        self._index: dict[tuple[Any, ...], dict[str, Any] | None] = {}
        self.ops_total = 0
        self.calls_total = 0
        self.truncated = False
        self.stack: list[Call] = []
        self.paused = 0
        self.errors: list[str] = []
        self.last_failed: tuple[BaseException, dict[str, Any]] | None = None
        self.before_dispatch: PreHook | None = None
        self.after_dispatch: DispatchHook | None = None
        self.after_call: Callable[[Call, tuple[Any, ...], dict[str, Any], Any], None] | None = None
        self._modes: list[Any] = []

    # installation

    def install(self) -> None:
        tf, td = _FunctionMode(self), _DispatchMode(self)
        tf.__enter__()
        self._modes.append(tf)
        td.__enter__()
        self._modes.append(td)

    def uninstall(self) -> None:
        while self._modes:
            mode = self._modes.pop()
            try:
                mode.__exit__(None, None, None)
            except Exception as exc:  # the snippet left the mode stack in a state we cannot undo
                self.note_error(f"could not remove {type(mode).__name__}: {exc}")

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Let the explainer's own tensor work run untraced."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1

    def note_error(self, message: str) -> None:
        if len(self.errors) < 3:
            self.errors.append(message)

    # the two hooks

    def on_function(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.paused:
            return func(*args, **kwargs)
        name = op_name(func)
        if name is None:
            return func(*args, **kwargs)
        line, direct, frame = _locate(self.filename, sys._getframe(2))
        call = Call(name, line, direct, frame)
        before = None
        if direct:
            try:
                before = (_inputs(args, kwargs), self._autocast_for(args, kwargs))
            except Exception as exc:
                self.note_error(f"inputs of {name}: {exc!r}")
                direct = False
        self.stack.append(call)
        try:
            out = func(*args, **kwargs)
        except BaseException as exc:
            self.stack.pop()
            if direct and before is not None:
                self._safe_record(call, before, None, exc)
            raise
        self.stack.pop()
        if direct and before is not None:
            if first_tensor(out) is not None or name in BACKWARD_NAMES:
                self._safe_record(call, before, out, None)
            if self.after_call is not None:
                self.paused += 1
                try:
                    self.after_call(call, args, kwargs, out)
                except Exception as exc:
                    self.note_error(f"after {name}: {exc!r}")
                finally:
                    self.paused -= 1
        return out

    def on_dispatch(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.paused:
            return func(*args, **kwargs)
        pre = None
        if self.before_dispatch is not None:
            try:
                self.paused += 1
                pre = self.before_dispatch(func, args, kwargs)
            except Exception as exc:
                self.note_error(f"before {func}: {exc!r}")
            finally:
                self.paused -= 1
        out = func(*args, **kwargs)
        call = self.stack[-1] if self.stack else None
        try:
            self.paused += 1
            if func is _TO_COPY and call is not None and call.direct:
                src = args[0] if args else None
                if isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor):
                    if src.dtype != out.dtype:
                        call.casts.append(
                            (dtype_name(src.dtype), dtype_name(out.dtype), tuple(src.shape))
                        )
            if self.after_dispatch is not None:
                self.after_dispatch(func, args, kwargs, out, pre, call)
        except Exception as exc:
            self.note_error(f"after {func}: {exc!r}")
        finally:
            self.paused -= 1
        return out

    # recording

    @staticmethod
    def _autocast_for(
        args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str | None, tuple[str, str] | None, tuple[str, str] | None]:
        """(device type of the inputs, autocast on that device, autocast on another device)."""
        device = None
        for t in _tensors(args, kwargs):
            device = t.device.type
            break
        on_here = other = None
        for dev in ("cpu", "cuda"):
            on, dt = autocast_state(dev)
            if on and dt is not None:
                if device is None or dev == device:
                    if on_here is None:
                        on_here = (dev, dtype_name(dt))
                else:
                    other = (dev, dtype_name(dt))
        return device, on_here, other

    def _safe_record(self, call: Call, before: Any, out: Any, exc: BaseException | None) -> None:
        self.paused += 1
        try:
            self._record(call, before, out, exc)
        except Exception as err:
            self.note_error(f"recording {call.name}: {err!r}")
        finally:
            self.paused -= 1

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
        casts = call.casts
        reason = reason_for(
            call.name, [d[0] for d in inputs], out_desc[0] if out_desc else None,
            autocast, other if autocast is None else None, device, casts, error,
        )
        casts_key = tuple(casts[:MAX_CASTS]) + ((len(casts),) if len(casts) > MAX_CASTS else ())
        key = (call.line, call.name, tuple(inputs), out_desc, autocast, casts_key, reason)
        self.calls_total += 1
        entry = self._index.get(key, False)
        if entry is False:
            self.ops_total += 1
            entry = None
            if len(self.ops) < self.max_ops:
                entry = {
                    "name": call.name,
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
                self.ops.append(entry)
            else:
                self.truncated = True
            if len(self._index) < MAX_SIGNATURES:
                self._index[key] = entry
        if entry is not None:
            entry["count"] += 1
        if exc is not None and entry is not None:
            self.last_failed = (exc, entry)


def _desc_dict(d: tuple[str, tuple[int, ...], str | None]) -> dict[str, Any]:
    return {"dtype": d[0], "shape": list(d[1]), "device": d[2]}
