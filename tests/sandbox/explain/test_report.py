"""Explanations, the report itself: bounded, folded, plain JSON, and installed only while tracing."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap

import pytest
import torch

from sandbox.explain import Explainer
from tests.support.explain import (
    LINEAR,
    TRAIN_SETUP,
    Explain,
    events,
    ops_named,
)

# --- size, folding, plumbing --------------------------------------------------------------------


def test_a_thousand_step_loop_gives_a_small_folded_report(explain: Explain) -> None:
    code = (
        TRAIN_SETUP
        + """
    for _ in range(1000):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.mse_loss(model(x), torch.zeros(4, 2))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    """
    )
    _, report = explain(code)

    assert len(json.dumps(report)) < 64 * 1024
    [linear] = ops_named(report, "torch.nn.functional.linear")
    assert linear["count"] == 1000
    [step] = events(report, "step")
    assert step["count"] == 1000
    assert report["ops_truncated"] is False


def test_many_distinct_calls_are_capped() -> None:
    code = """
        import torch
        for n in range(1, 40):
            torch.ones(n, dtype=torch.float16).sum()
    """
    out = io.StringIO()
    explainer = Explainer(filename="<snippet>", max_ops=10)
    with contextlib.redirect_stdout(out), explainer:
        exec(compile(textwrap.dedent(code), "<snippet>", "exec"), {})  # noqa: S102
    report = explainer.report()

    assert len(report["ops"]) == 10
    assert report["ops_truncated"] is True
    assert report["ops_total"] == 78  # 39 x (torch.ones, Tensor.sum)


def test_report_is_plain_json(explain: Explain) -> None:
    _, report = explain(LINEAR.format(dtype="float16"))
    assert json.loads(json.dumps(report, allow_nan=False)) == report
    assert set(report) >= {"summary", "ops", "ops_truncated", "ops_total", "scaler", "hazards"}


def test_tracing_is_installed_only_inside_the_with_block_and_exceptions_pass_through() -> None:
    from torch._dynamo.output_graph import OutputGraph
    from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

    scale, compiler = torch.amp.GradScaler.scale, OutputGraph.call_user_compiler
    hooks = (len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks))
    explainer = Explainer()
    assert torch.amp.GradScaler.scale is scale  # constructing installs nothing
    with pytest.raises(ZeroDivisionError), explainer:
        assert torch.amp.GradScaler.scale is not scale
        assert OutputGraph.call_user_compiler is not compiler
        code = "import torch\ntorch.ones(2).sum()\n1 / 0\n"
        exec(compile(code, "<snippet>", "exec"), {})  # noqa: S102
    assert torch.amp.GradScaler.scale is scale
    assert OutputGraph.call_user_compiler is compiler
    assert (len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks)) == hooks
    assert torch._C._len_torch_function_stack() == 0
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None
    report = explainer.report(exception=None)  # falls back to the exception seen on exit
    assert report["error"]["type"] == "ZeroDivisionError"
    assert report["error"]["line"] == 3
    assert "ZeroDivisionError" in report["summary"][0] and "line 3" in report["summary"][0]


def test_print_output_is_untouched(explain: Explain) -> None:
    stdout, report = explain("""
        import torch
        x = torch.ones(2, 2)
        print(x)
        print(x.dtype, x.shape)
    """)
    assert stdout == "tensor([[1., 1.],\n        [1., 1.]])\ntorch.float32 torch.Size([2, 2])\n"
    assert not [op for op in report["ops"] if "repr" in op["name"] or "format" in op["name"]]


def test_the_pools_bounds_name_every_kind_the_report_declares() -> None:
    """The pool checks kinds by name without importing the explainer: the same names."""
    from typing import get_args

    from sandbox import claims
    from sandbox.explain.report import HazardKind, RegionKind

    assert set(claims.HAZARD_KINDS) == set(get_args(HazardKind))
    assert set(claims.REGION_KINDS) == set(get_args(RegionKind))
