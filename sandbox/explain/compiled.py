"""What a `torch.compile`d function computes, read from the graph Dynamo hands its backend.

The op trace cannot follow a compiled function: Dynamo traces the function once (the trace's
modes step aside while it does), and the compiled code then runs as a graph, kernels or
Python, that calls nothing the function mode sees. A learner saw "The snippet ran 1 traced
torch calls" for a compiled forward pass and loss. What Dynamo does hand over, to the backend, is
the FX graph with each node's example value (a fake tensor of the dtype and shape the node
computes, under the autocast state traced into the graph) and the snippet line it came from.
Each node computing a tensor becomes a row, marked as read from the graph (`region` "compiled"),
counted each time the graph runs (the compiled function Dynamo gets back is wrapped to count);
calls inside the graph are still not traced as they run.

How: `OutputGraph.call_user_compiler` (torch/_dynamo/output_graph.py) is wrapped on the class
for the run, as GradScaler's methods are, and restored on exit; when it is missing (another
torch), nothing is read and the compiled calls stay untraced.

Runs in: the runner (part of the explanation). Only torch and the standard library are imported.
"""

from __future__ import annotations

import functools
import math
import operator
import re
import sys
from typing import TYPE_CHECKING, Any

import torch

from sandbox.explain.calls import Call, autocast_state, dtype_name, op_name
from sandbox.explain.report import OpRecord

if TYPE_CHECKING:
    from sandbox.explain.ops import OpTracer

MAX_NODES = 64
"""Rows read from one graph at most (a model's graph can hold thousands of nodes)."""
_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}
_RESUMED = re.compile(r"torch_dynamo_resume_in_(.+)_at_(\d+)")
"""Dynamo's name for the code that resumes a function after a graph break."""
_OPERATORS = {getattr(operator, n): f"Tensor.__{n}__" for n in ("add", "sub", "mul", "truediv", "matmul", "pow", "neg")}  # fmt: skip


class CompiledGraphs:
    def __init__(self, tracer: OpTracer) -> None:
        self.tracer = tracer
        self._saved: tuple[type, Any] | None = None
        self.graphs = 0

    def install(self) -> None:
        try:  # imported ahead by the zygote (as creating any optimizer imports it): free there
            import torch._dynamo.output_graph as module
        except Exception:  # noqa: BLE001 - no Dynamo: compiled calls stay untraced
            return
        cls: Any = getattr(module, "OutputGraph", None)
        original = getattr(cls, "call_user_compiler", None)
        if cls is None or original is None:
            return
        reader = self

        @functools.wraps(original)
        def call_user_compiler(graph: Any, gm: Any, example_inputs: Any) -> Any:
            rows: list[OpRecord] = []
            try:
                with reader.tracer.pause():
                    rows = reader.read(graph, gm)
            except Exception as exc:  # noqa: BLE001 - the snippet's compile goes on regardless
                reader.tracer.note_error(f"reading a compiled graph: {exc!r}")
            compiled_fn = original(graph, gm, example_inputs)
            return _counting(compiled_fn, rows) if rows and callable(compiled_fn) else compiled_fn

        setattr(cls, "call_user_compiler", call_user_compiler)  # noqa: B010 - a private class
        self._saved = (cls, original)

    def uninstall(self) -> None:
        if self._saved is not None:
            cls, original = self._saved
            setattr(cls, "call_user_compiler", original)  # noqa: B010
            self._saved = None

    # reading one graph

    def read(self, graph: Any, gm: Any) -> list[OpRecord]:
        """The rows of one graph, each counted 0 times: `_counting` counts the graph's runs."""
        filename = self.tracer.filename
        here = _snippet_line_now(filename)
        self.graphs += 1
        on = f" on line {here}" if here is not None else ""
        what = _compiled_name(graph, filename)
        resumed = _RESUMED.fullmatch(what or "")
        if resumed:  # the code after a graph break, compiled as a function of its own
            what = f"{resumed[1]} after its graph break on line {resumed[2]}"
        words = (
            f"in the graph torch.compile traced of {what}" if what else "in a torch.compile graph"
        ) + f" (compiled{on}; read from the graph: its calls are not traced as they run)"
        stack: list[dict[str, str]] = []
        found: list[OpRecord] = []
        rows = 0
        for node in gm.graph.nodes:
            if node.op not in ("call_function", "call_method", "call_module"):
                continue
            name = _node_name(node, gm)
            if name.endswith("_enter_autocast"):
                stack.append(_entered(node.args))
                continue
            if name.endswith("_exit_autocast"):
                if stack:
                    stack.pop()
                continue
            out = _meta(node.meta.get("example_value"))
            if out is None or rows >= MAX_NODES:
                continue
            rows += 1
            inputs = [d for d in (_meta(_value(a)) for a in _flat(node.args, node.kwargs)) if d]
            device = next((d[2].split(":")[0] for d in inputs if d[2]), None) or out[2]
            state = stack[-1] if stack else _ambient(device)
            ac = (device, state[device]) if device in state else None
            call = Call(name, _line_of(node, filename) or here, True)
            call.region = ("compiled", words)
            reason = f"{words}: {_why(inputs, out[0], ac)}"
            entry = self.tracer.add_row(call, inputs, out, ac, reason)
            if entry is not None:
                entry["count"] -= 1  # counted as the graph runs, not as it is read
                found.append(entry)
        return found


def _counting(compiled_fn: Any, rows: list[OpRecord]) -> Any:
    """`compiled_fn`, counting each of its runs on its rows (no torch call: nothing to see)."""

    @functools.wraps(compiled_fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        for entry in rows:
            entry["count"] += 1
        return compiled_fn(*args, **kwargs)

    return run


def _snippet_line_now(filename: str) -> int | None:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename == filename:
            return f.f_lineno
        f = f.f_back  # type: ignore[assignment]
    return None


def _compiled_name(graph: Any, filename: str) -> str | None:
    """The compiled function's name when it is the snippet's own (the frame Dynamo traced, via
    its root tracer); None for torch's (a compiled nn.Module is traced through a wrapper)."""
    code = getattr(getattr(graph, "root_tx", None), "f_code", None)
    if code is None or code.co_filename != filename:
        return None
    return str(getattr(code, "co_qualname", None) or code.co_name)


def _node_name(node: Any, gm: Any) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        try:
            return type(gm.get_submodule(node.target)).__name__
        except Exception:  # noqa: BLE001
            return str(node.target)
    target = node.target
    if target in _OPERATORS:
        return _OPERATORS[target]
    return op_name(target) or str(getattr(target, "__name__", target))


def _entered(args: tuple[Any, ...]) -> dict[str, str]:
    """{device type: dtype} of autocast on after an `_enter_autocast(device, dtype, enabled,
    cache_enabled)` node (torch/amp/autocast_mode.py)."""
    device = args[0] if args else None
    dtype = args[1] if len(args) > 1 else None
    enabled = args[2] if len(args) > 2 else True
    if not isinstance(device, str) or not enabled:
        return {}
    if not isinstance(dtype, torch.dtype):
        dtype = torch.get_autocast_dtype(device)
    return {device: dtype_name(dtype)}


def _ambient(device: str | None) -> dict[str, str]:
    """Autocast around the compiled call (the graph was traced, and is guarded, under it)."""
    if device is None:
        return {}
    on, dt = autocast_state(device)
    return {device: dtype_name(dt)} if on and dt is not None else {}


def _value(a: Any) -> Any:
    return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a


def _flat(args: Any, kwargs: Any) -> list[Any]:
    out: list[Any] = []
    for v in (*args, *kwargs.values()):
        out.extend(v if isinstance(v, (list, tuple)) else (v,))
    return out


def _meta(x: Any) -> tuple[str, tuple[int, ...], str | None] | None:
    """(dtype, shape, device) of an example value; a symbolic size reads as its hint, or 0."""
    if isinstance(x, torch.Tensor):
        shape = tuple(_size(s) for s in x.shape)
        return dtype_name(x.dtype), shape, str(x.device)
    if isinstance(x, float) and math.isfinite(x):
        return "python float", (), None
    return None


def _size(s: Any) -> int:
    if type(s) is int:
        return s
    hint = getattr(getattr(s, "node", None), "hint", None)
    return hint if type(hint) is int and hint >= 0 else 0


def _line_of(node: Any, filename: str) -> int | None:
    """The snippet line a node came from: the last snippet frame of its recorded stack."""
    trace = node.meta.get("stack_trace") or ""
    found = re.findall(r'File "' + re.escape(filename) + r'", line (\d+)', trace)
    return int(found[-1]) if found else None


def _why(inputs: list[tuple[str, tuple[int, ...], str | None]], out: str, ac: Any) -> str:
    floats = sorted({d[0] for d in inputs if d[0] in _RANK}, key=lambda d: _RANK[d])
    if not floats:
        return f"new {out} tensor"
    if ac is not None:
        if out == ac[1] and "float32" in floats:
            return f"autocast ({ac[0]}, {ac[1]}), traced into the graph, runs it in {ac[1]}"
        if out == "float32" and floats == [ac[1]]:
            return "autocast, traced into the graph, runs it in float32 (its float32 list)"
    if len(floats) > 1 and out == floats[-1]:
        under = " under autocast (traced into the graph)" if ac is not None else ""
        return f"returns {out}, the widest of its inputs' dtypes{under}"
    if floats == [out]:
        return f"follows its input ({out})"
    return f"returns {out}"
