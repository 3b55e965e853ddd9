"""On a CUDA host only (`pytest -m gpu`): what CUDA autocast does to each probed op, against the
lists torch's header declares, and the reasons our trace gives for it.

The same op probes as the CPU's (`test_agrees_with_torch.OPS`), run under `torch.autocast("cuda")`
in float16 and in bfloat16, each op three times: float32 inputs, lower-precision inputs, and mixed
inputs. The dtypes torch produced say which list CUDA autocast put the op on; for every op the
header (`ATen/autocast_mode.h`) names, that must be the header's list. Where CUDA differs from the
CPU (softmax, sum and the losses in float32; `binary_cross_entropy` refused outright), this is the
place it is seen. Our trace's reason must name the same list, as on the CPU.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from sandbox import Limits, Sandbox
from tests.sandbox.explain.test_agrees_with_torch import OPS
from tests.support.autocast_header import cuda_policy
from tests.support.explain import DTYPES, explain_in

pytestmark = pytest.mark.gpu

PROBE = """
import torch
import torch.nn.functional as F
torch.manual_seed(0)
def f32(*shape):
    return torch.rand(*shape, device="cuda")
def low(*shape):
    return torch.rand(*shape, device="cuda").to(torch.{dtype})
idx = torch.tensor([0, 2], device="cuda")
with torch.autocast("cuda", dtype=torch.{dtype}):
    out_a = {a}  # float32 inputs
    out_b = {b}  # lower-precision inputs
    out_c = {c}  # mixed: the first lower-precision, the rest float32
"""

HEADER_NAME = {"grid_sample": "grid_sampler", "interpolate": "upsample_linear1d"}
"""The header's aten name where the probe calls the op by another."""

AMPLE = Limits(wall_s=60.0, cpu_s=60)


def _probe(template: str, dtype: str) -> str:
    def fill(first: str, rest: str) -> str:
        parts = template.split("T(")
        return parts[0] + "".join(
            (first if i == 0 else rest) + "(" + p for i, p in enumerate(parts[1:])
        )

    c = fill("low", "f32") if template.count("T(") > 1 else "None"
    return PROBE.format(dtype=dtype, a=fill("f32", "f32"), b=fill("low", "low"), c=c)


def _observed(report: dict[str, Any], code: str, low: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """(the list torch's dtypes put the op on, {probe line: our trace's op on it})."""
    lines = textwrap.dedent(code).splitlines()
    ops: dict[str, dict[str, Any]] = {}
    for k in "abc":
        number = next(i for i, s in enumerate(lines, 1) if s.strip().startswith(f"out_{k} ="))
        found = [op for op in report["ops"] if op["line"] == number]
        if found:
            ops[k] = found[0]

    def out(k: str) -> str | None:
        op = ops.get(k)
        return (op.get("output") or {}).get("dtype") if op else None

    if out("a") == low:
        return "lower_precision_fp", ops
    if out("b") == "float32":
        return "fp32", ops
    if out("b") == low and out("c") == "float32":
        return "promote", ops
    return "unlisted", ops


def _reason_problem(op: dict[str, Any], category: str, low: str) -> str | None:
    out = (op.get("output") or {}).get("dtype")
    reason = op["reason"]
    casts = {c["to"] for c in op["casts"]}
    if low in casts and out == low:
        want = f"cast to {low} by autocast"
    elif "float32" in casts and out == "float32":
        want = (
            "promoted to the widest input (float32) by autocast"
            if category == "promote"
            else "run in float32 by autocast (it is on autocast's float32 list)"
        )
    else:
        return (
            f"reason {reason!r} credits autocast, which cast nothing"
            if "by autocast" in reason
            else None
        )
    return None if reason.startswith(want) else f"reason {reason!r}, want {want!r}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_autocast_puts_each_op_on_the_headers_list(sandbox_pool: Sandbox, dtype: str) -> None:
    if sandbox_pool.environment.get("device_kind") != "cuda":
        pytest.fail("pytest -m gpu needs a CUDA host: this sandbox found no GPU")
    problems: list[str] = []
    seen: dict[str, str] = {}
    for name, template in OPS.items():
        code = _probe(template, dtype)
        _, report = explain_in(sandbox_pool, code, AMPLE)
        error = report.get("error") or {}
        if name == "binary_cross_entropy":
            if "unsafe to autocast" not in (error.get("message") or ""):
                problems.append(f"{name}: CUDA autocast did not refuse it: {error or 'no error'}")
            seen[name] = "refused"
            continue
        category, ops = _observed(report, code, dtype)
        seen[name] = category
        if "a" not in ops or "b" not in ops:
            problems.append(
                f"{name}: the probe did not run to its lower-precision line: {error or 'no op traced'}"
            )
            continue
        header = cuda_policy(HEADER_NAME.get(name, name))
        header = "fp32" if header in ("fp32_set_opt_dtype", "fp32_append_dtype") else header
        if header != "unlisted" and category != header:
            problems.append(
                f"{name}: torch's dtypes say {category}, the header says {header} ({error or 'ran'})"
            )
        for k, op in ops.items():
            problem = _reason_problem(op, category, dtype)
            if problem:
                problems.append(f"{name} ({k}): {problem}")
    by_list: dict[str, list[str]] = {}
    for name, category in seen.items():
        by_list.setdefault(category, []).append(name)
    print(
        f"CUDA autocast, {dtype}: "
        + "; ".join(f"{c}: {', '.join(sorted(n))}" for c, n in sorted(by_list.items()))
    )
    assert not problems, "\n".join(problems)
    # where CUDA differs from the CPU's lists, as a fixed point
    assert seen["softmax"] == seen["sum"] == seen["mse_loss"] == "fp32"
    assert seen["mm"] == seen["linear"] == "lower_precision_fp"
