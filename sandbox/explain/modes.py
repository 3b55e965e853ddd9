"""The two modes of the op trace (`sandbox.explain.ops.OpTracer`): the function mode, on for the
whole run, which sees each torch call with the frame that made it, and the dispatch mode, pushed
around the calls worth watching, which sees the aten ops underneath (autocast's casts among them).

Runs in: the runner. Only torch and the standard library are imported.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from sandbox.explain.calls import NAMES
from sandbox.explain.grad_reads import GRAD
from sandbox.explain.unseen import HANDING_OVER, caller_of
from sandbox.frames import called_from

if TYPE_CHECKING:
    from sandbox.explain.ops import OpTracer


class FunctionMode(TorchFunctionMode):
    def __init__(self, tracer: OpTracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # Fast path first: property reads (`p.grad`, `x.dtype`) are most of the calls.
        if kwargs is None:
            kwargs = {}
        if torch.compiler.is_compiling():
            # While torch.compile traces, step aside: tracing into the recorder (its frame walk)
            # would break the snippet's graph into pieces and change what it prints (graph counts,
            # recompiles). The compiled code's calls are not seen when it runs either (a graph
            # calls nothing this mode sees): `sandbox.explain.compiled` reads them from the graph.
            return func(*args, **kwargs)
        if self.tracer.paused:  # the explainer's own calls
            return func(*args, **kwargs)
        # Called from a stand-in for the snippet's frame (or torch's, for its internal calls), so
        # a warning torch raises "at its caller" is where a fresh `python` puts it.
        caller = sys._getframe(1)
        if caller.f_code is HANDING_OVER:  # a Python function of torch's handed the call over
            caller = caller_of(func, caller)
        call = called_from(caller)
        if NAMES.get(func, "") is None:
            out = call(func, args, kwargs)
            grads = self.tracer.grads
            if grads is not None and grads.pending and getattr(func, "__self__", None) is GRAD:
                grads.saw_grad(out)  # a `p.grad` read while gradients may be scaled
            return out
        return self.tracer.on_function(func, args, kwargs, call)


class DispatchMode(TorchDispatchMode):
    def __init__(self, tracer: OpTracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.tracer.on_dispatch(func, args, kwargs or {})
