"""How the explainer keeps out of the snippet's sight: what it does must not change what the snippet
prints, raises or warns (an explained run is what learners are shown, and keys are checked against).

- `OwnWork` (`OpTracer.pause`): the explainer's own tensor work, unseen by the snippet's modes,
  `__torch_function__` subclasses and recorded warnings; `own_dispatch`: tensors it runs none on;
- `caller_of`: the frame a torch call came from, which the explainer calls torch from a stand-in
  for (`sandbox.frames.called_from`), so torch's warnings name the snippet's line;
- `decomposes_past_autocast`: calls whose own ops it does not trace under autocast.

Runs in: the runner. Only torch and the standard library are imported.
"""

from __future__ import annotations

import warnings
from types import FrameType, TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes


class OwnWork:
    """`with tracer.pause():` (`ops.OpTracer.pause`) the explainer's own tensor work (its overflow
    checks, its reads of dtypes and scales) runs untraced, and unseen by the snippet: by its dispatch modes (a
    TorchDispatchMode that prints each op, torch's DebugMode), its function modes and tensor
    subclasses' `__torch_function__` (they printed the checks' `abs`, `aminmax` and `item` after
    every op of the snippet's, a `__get__` per dtype read), and its warnings (a check re-running
    `torch.tensor(t)` added a warning to the snippet's `catch_warnings`). A tensor subclass's own
    `__torch_dispatch__` would still see it: the explainer checks no such tensor
    (`own_dispatch`). A class, not a generator: it is entered around every low-precision op."""

    __slots__ = ("functions", "modes", "shown", "tracer")

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.functions = torch._C.DisableTorchFunction()
        self.modes: Any = None
        self.shown: Any = None

    def __enter__(self) -> None:
        # Shown (or recorded) through this hook, which Python looks up at each warning: the
        # filters, and so the snippet's own record of what it was shown, are left alone. A
        # snippet may have deleted it (Python then prints by itself): it is put back as it was.
        self.shown = vars(warnings).get("_showwarnmsg", _ABSENT)
        # Private hook: typeshed leaves it out.
        warnings._showwarnmsg = _shown_to_no_one  # type: ignore[attr-defined]
        self.tracer.paused += 1
        self.functions.__enter__()
        try:
            if torch._C._len_torch_dispatch_stack():
                self.modes = _disable_current_modes()
                self.modes.__enter__()
        except BaseException:  # a mode stack the snippet broke: nothing of this stays on
            self.modes = None
            self.__exit__(None, None, None)
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.modes is not None:
                self.modes.__exit__(exc_type, exc, tb)
        finally:
            self.functions.__exit__(exc_type, exc, tb)
            self.tracer.paused -= 1
            if self.shown is _ABSENT:
                vars(warnings).pop("_showwarnmsg", None)
            else:
                warnings._showwarnmsg = self.shown  # type: ignore[attr-defined]  # private hook


_ABSENT = object()


def _shown_to_no_one(_message: Any) -> None:
    pass


DECOMPOSED_PAST_AUTOCAST = frozenset(
    {
        "bilinear",
        "linalg_pinv",
        "linalg_svdvals",
        "linalg_eigvalsh",
        "linalg_cond",
        "_sparse_mm",
        "_sparse_addmm",
    }
)
"""Ops (by the torch function's name) that autocast reaches only inside torch's decomposition of
them, and that any Python dispatch mode (the explainer's ops trace) puts out of its reach: under
autocast they computed in float32 where the snippet alone computes in bfloat16 (other digits,
another dtype). Found on torch 2.13 by running torch's samples of each of its ops (702) under
CPU autocast with and without a dispatch mode that does nothing; other composite ops (`einsum`,
`tensordot`) print the same either way. Their own ops are not traced (`decomposes_past_autocast`)."""


def decomposes_past_autocast(func: Any) -> bool:
    return getattr(func, "__name__", None) in DECOMPOSED_PAST_AUTOCAST


_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__


def own_dispatch(x: Any) -> bool:
    """A tensor subclass with a `__torch_dispatch__` of its own (a logging or wrapper tensor): it
    would see every op the explainer's checks ran on it, and a wrapper may not run them at all."""
    return isinstance(x, torch.Tensor) and type(x).__torch_dispatch__ is not _PLAIN_DISPATCH


HANDING_OVER = torch.overrides.handle_torch_function.__code__
"""The code of the frame through which torch's Python functions hand a call to the modes."""


def caller_of(func: Any, frame: FrameType) -> FrameType:
    """The frame that called the torch function `func`, given `handle_torch_function`'s frame
    (`HANDING_OVER`), through which torch's Python functions (`F.softmax`, `Tensor.backward`) reach
    the modes: the frame beyond the function's own and any wrapper of it. (For torch's C functions,
    `torch.tensor` or a tensor's `.grad`, the frame that called `__torch_function__` is the caller.)"""
    if frame.f_back is None:
        return frame
    own = set()
    try:
        for _ in range(100):  # the function and what it wraps (functools.wraps); a cycle ends here
            if func is None:
                break
            if (code := getattr(func, "__code__", None)) is not None:
                own.add(code)
            func = getattr(func, "__wrapped__", None)
    except Exception:  # noqa: BLE001, S110 - a snippet's function whose attributes raise: its own frame is still known
        pass
    f = frame.f_back  # the function's own frame
    while f.f_back is not None and f.f_back.f_code in own:
        f = f.f_back
    return f.f_back or f
