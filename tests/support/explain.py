"""Shared by the explanation tests: run a snippet through the real pool with explain=True.

The tests get `explain(code)` from the `explain` fixture (tests/sandbox/explain/conftest.py), which
binds `explain_in` to the session's pool.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from sandbox import Limits, Sandbox

DTYPES = ["float16", "bfloat16"]

Explain = Callable[[str], tuple[str, dict[str, Any]]]
"""`explain(code) -> (stdout, report)`, as the `explain` fixture gives it."""


def explain_in(
    pool: Sandbox, code: str, limits: Limits | None = None
) -> tuple[str, dict[str, Any]]:
    """Run a snippet in the sandbox with explain=True; return (stdout, report)."""
    result = pool.run(textwrap.dedent(code), limits, explain=True)
    assert result.status in ("ok", "error"), result
    assert result.explanation is not None, result
    return result.stdout, result.explanation


def line_of(code: str, text: str) -> int:
    """1-based line of the first line of the (dedented) snippet that contains `text`."""
    for number, line in enumerate(textwrap.dedent(code).splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in snippet")


def ops_named(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [op for op in report["ops"] if op["name"] == name]


def events(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in report["scaler"] if e["event"] == kind]


LINEAR = """
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.{dtype}):
        out = model(x)
        loss = F.mse_loss(out, torch.zeros(4, 2))
    print(out.dtype, loss.dtype)
"""


TRAIN_SETUP = """
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(4, 8)
"""
