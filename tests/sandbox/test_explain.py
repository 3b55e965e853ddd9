"""What `sandbox.explain` tells a learner about a snippet: dtypes and casts, GradScaler, hazards.

Real runs: each snippet goes through the warm sandbox pool with `explain=True`, exactly as a
learner's run does; a few tests at the end check the `Explainer` API itself in-process.
"""

from __future__ import annotations

import contextlib
import io
import json
import textwrap
from typing import Any

import pytest
import torch

from sandbox import Sandbox
from sandbox.explain import Explainer

DTYPES = ["float16", "bfloat16"]
_pool: list[Sandbox] = []


@pytest.fixture(autouse=True, scope="module")
def _use_the_pool(sb: Sandbox):
    _pool.append(sb)
    yield
    _pool.clear()


def explain(code: str) -> tuple[str, dict[str, Any]]:
    """Run a snippet in the sandbox with explain=True; return (stdout, report)."""
    result = _pool[0].run(textwrap.dedent(code), explain=True)
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


# --- autocast: casts and reasons ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_under_autocast_shows_three_casts_and_low_precision_output(dtype: str) -> None:
    code = LINEAR.format(dtype=dtype)
    stdout, report = explain(code)
    assert stdout == f"torch.{dtype} torch.float32\n"

    [linear] = ops_named(report, "torch.nn.functional.linear")
    assert linear["line"] == line_of(code, "out = model(x)")
    assert linear["output"] == {"dtype": dtype, "shape": [4, 2], "device": "cpu"}
    assert [i["dtype"] for i in linear["inputs"]] == ["float32"] * 3
    assert linear["autocast"] == {"device_type": "cpu", "dtype": dtype}
    # input, weight and bias, each cast from float32 by autocast
    assert len(linear["casts"]) == 3
    assert {(c["from"], c["to"]) for c in linear["casts"]} == {("float32", dtype)}
    assert sorted(c["shape"] for c in linear["casts"]) == [[2], [2, 8], [4, 8]]
    assert f"cast to {dtype} by autocast" in linear["reason"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_mse_loss_on_low_precision_output_runs_in_float32(dtype: str) -> None:
    code = LINEAR.format(dtype=dtype)
    _, report = explain(code)

    [mse] = ops_named(report, "torch.nn.functional.mse_loss")
    assert mse["line"] == line_of(code, "loss = F.mse_loss")
    assert mse["inputs"][0]["dtype"] == dtype
    assert mse["output"]["dtype"] == "float32"
    assert {"from": dtype, "to": "float32", "shape": [4, 2]} in mse["casts"]
    assert "float32" in mse["reason"] and "autocast" in mse["reason"]
    assert any("mse_loss" in s and "float32" in s for s in report["summary"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_summary_starts_with_the_autocast_cast_and_its_line(dtype: str) -> None:
    code = LINEAR.format(dtype=dtype)
    _, report = explain(code)

    first = report["summary"][0]
    assert "torch.nn.functional.linear" in first
    assert f"line {line_of(code, 'out = model(x)')}" in first
    assert dtype in first and "autocast" in first
    assert 1 <= len(report["summary"]) <= 4


def test_ops_outside_autocast_say_so() -> None:
    code = """
        import torch
        a = torch.randn(3, 3)
        b = a @ a
        c = a.half() * 2
    """
    _, report = explain(code)

    [matmul] = [op for op in report["ops"] if op["line"] == line_of(code, "b = a @ a")]
    assert matmul["autocast"] is None
    assert matmul["output"]["dtype"] == "float32"
    assert "outside autocast" in matmul["reason"]
    [half] = ops_named(report, "Tensor.half")
    assert half["casts"] == [{"from": "float32", "to": "float16", "shape": [3, 3]}]
    assert "float16" in half["reason"]
    [mul] = [
        op
        for op in report["ops"]
        if op["line"] == line_of(code, "c = a.half() * 2") and op["name"] != "Tensor.half"
    ]
    assert "outside autocast" in mul["reason"] and "float16" in mul["reason"]
    assert "outside autocast" in report["summary"][0]


def test_mixed_dtypes_outside_autocast_are_promoted() -> None:
    code = """
        import torch
        a = torch.ones(4, dtype=torch.float16)
        b = torch.ones(4)
        c = a + b
    """
    _, report = explain(code)

    [add] = [op for op in report["ops"] if op["line"] == line_of(code, "c = a + b")]
    assert add["output"]["dtype"] == "float32"
    assert "promoted to the widest input" in add["reason"]


def test_module_defined_in_the_snippet_reports_the_line_inside_forward() -> None:
    code = """
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)
            def forward(self, x):
                return torch.relu(self.fc(x))
        net = Net()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = net(torch.randn(2, 8))
    """
    _, report = explain(code)

    [linear] = ops_named(report, "torch.nn.functional.linear")
    assert linear["line"] == line_of(code, "return torch.relu")
    assert linear["output"]["dtype"] == "bfloat16"
    # nn.Linear's own parameter initialisation is library code, not the learner's ops
    assert not [op for op in report["ops"] if op["name"].startswith("torch.nn.init")]
    assert not [op for op in report["ops"] if op["name"] == "torch.empty"]


def test_casts_are_seen_under_inference_mode_too() -> None:
    code = """
        import torch
        model = torch.nn.Linear(4, 2)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(torch.randn(3, 4))
    """
    _, report = explain(code)

    [linear] = ops_named(report, "torch.nn.functional.linear")
    assert len(linear["casts"]) == 3
    assert "cast to bfloat16 by autocast" in linear["reason"]


def test_autocast_promote_ops_are_not_called_float32_ops() -> None:
    code = """
        import torch
        a = torch.rand(4, 4)
        with torch.autocast("cpu", dtype=torch.float16):
            h = torch.mm(a, a)
            c = torch.cat([h, a])
    """
    _, report = explain(code)

    [cat] = ops_named(report, "torch.cat")
    assert cat["output"]["dtype"] == "float32"
    assert "promoted to the widest input" in cat["reason"]


def test_failed_op_is_traced_and_the_mismatch_explained() -> None:
    code = """
        import torch
        a = torch.randn(3, 3).half()
        b = torch.randn(3, 3)
        c = torch.mm(a, b)
    """
    _, report = explain(code)

    assert report["error"]["type"] == "RuntimeError"
    assert report["error"]["line"] == line_of(code, "torch.mm")
    [mm] = ops_named(report, "torch.mm")
    assert mm["output"] is None and "RuntimeError" in mm["reason"]
    first = report["summary"][0]
    assert "torch.mm" in first and f"line {line_of(code, 'torch.mm')}" in first
    assert "float16" in first and "float32" in first


# --- numeric hazards ----------------------------------------------------------------------------


def test_float16_sum_overflow_is_a_hazard_on_its_line() -> None:
    code = """
        import torch
        x = torch.full((4096,), 16., dtype=torch.float16)
        s = x.sum()
        print(s.item())
    """
    stdout, report = explain(code)
    assert stdout == "inf\n"

    [hazard] = [h for h in report["hazards"] if h["kind"] == "overflow"]
    assert hazard["line"] == line_of(code, "s = x.sum()")
    assert hazard["op"] == "Tensor.sum"
    assert "65504" in hazard["message"]
    first = report["summary"][0]
    assert "Tensor.sum" in first and f"line {hazard['line']}" in first and "overflow" in first


def test_bfloat16_sum_does_not_overflow() -> None:
    code = """
        import torch
        s = torch.full((4096,), 16., dtype=torch.bfloat16).sum()
    """
    _, report = explain(code)
    assert report["hazards"] == []


def test_adding_a_small_number_to_float16_one_is_absorbed() -> None:
    code = """
        import torch
        a = torch.tensor(1., dtype=torch.float16) + 0.0001
        print(a.item())
    """
    stdout, report = explain(code)
    assert stdout == "1.0\n"

    [hazard] = report["hazards"]
    assert hazard["kind"] == "absorption"
    assert hazard["line"] == line_of(code, "+ 0.0001")
    assert "float16" in hazard["message"]
    assert "absorption" in report["summary"][0]


def test_casting_a_tiny_value_to_float16_underflows() -> None:
    code = """
        import torch
        u = torch.tensor(1e-8).half()
    """
    _, report = explain(code)

    [hazard] = report["hazards"]
    assert hazard["kind"] == "underflow"
    assert hazard["line"] == line_of(code, ".half()")
    assert hazard["op"] == "Tensor.half"


def test_a_literal_too_large_for_float16_overflows_where_it_is_created() -> None:
    code = """
        import torch
        for v in [65504.0, 70000.0, 1e-8]:
            t = torch.tensor(v, dtype=torch.float16)
        b = torch.tensor([70000.0, 1e-8], dtype=torch.bfloat16)
    """
    _, report = explain(code)

    line = line_of(code, "t = torch.tensor")
    kinds = {(h["kind"], h["line"], h["op"]) for h in report["hazards"]}
    assert kinds == {("overflow", line, "torch.tensor"), ("underflow", line, "torch.tensor")}


def test_relu_zeros_and_division_by_zero_are_not_hazards() -> None:
    code = """
        import torch
        x = torch.tensor([-1., 0., 2.], dtype=torch.float16)
        r = torch.relu(x)
        d = torch.tensor([1.], dtype=torch.float16) / torch.tensor([0.], dtype=torch.float16)
    """
    _, report = explain(code)
    assert report["hazards"] == []


# --- GradScaler ---------------------------------------------------------------------------------

TRAIN_SETUP = """
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(4, 8)
"""


def test_step_without_scale_is_explained_as_the_missing_scale_call() -> None:
    code = (
        TRAIN_SETUP
        + """
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(model(x), torch.zeros(4, 2))
    loss.backward()
    scaler.step(opt)
    """
    )
    _, report = explain(code)

    step_line = line_of(code, "scaler.step(opt)")
    assert report["error"]["type"] == "AssertionError"
    assert report["error"]["line"] == step_line
    assert "scaler.scale(loss) was never called" in report["error"]["explanation"]
    [error_event] = events(report, "error")
    assert error_event["call"] == "step" and error_event["line"] == step_line
    first = report["summary"][0]
    assert f"line {step_line}" in first and "scaler.step()" in first and "scale(loss)" in first


@pytest.mark.parametrize("dtype", DTYPES)
def test_inf_gradient_skips_the_step_and_halves_the_scale(dtype: str) -> None:
    code = (
        TRAIN_SETUP
        + f"""
    with torch.autocast("cpu", dtype=torch.{dtype}):
        loss = F.mse_loss(model(x), torch.zeros(4, 2))
    scaler.scale(loss).backward()
    model.weight.grad.fill_(float("inf"))
    before = model.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    print(scaler.get_scale(), torch.equal(before, model.weight))
    """
    )
    stdout, report = explain(code)
    assert stdout == "32768.0 True\n"

    [scale] = events(report, "scale")
    assert scale["scale"] == 65536.0 and scale["line"] == line_of(code, "scaler.scale(loss)")
    [check] = events(report, "inf_check")
    assert check["found_inf"] is True
    [step] = events(report, "step")
    assert step["taken"] is False and step["line"] == line_of(code, "scaler.step(opt)")
    [update] = events(report, "update")
    assert (update["old_scale"], update["new_scale"]) == (65536.0, 32768.0)
    assert update["line"] == line_of(code, "scaler.update()")
    sentence = next(s for s in report["summary"] if "GradScaler" in s)
    assert "skipped" in sentence and "65536" in sentence and "32768" in sentence


def test_backward_on_the_unscaled_loss_is_flagged() -> None:
    code = (
        TRAIN_SETUP
        + """
    for step in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.mse_loss(model(x), torch.zeros(4, 2))
        if step == 0:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        scaler.step(opt)
        scaler.update()
    """
    )
    _, report = explain(code)

    [misuse] = events(report, "misuse")
    assert f"line {line_of(code, '    loss.backward()')}" in misuse["message"]
    assert "unscaled loss" in misuse["message"]
    assert "unscaled loss" in report["summary"][0]


def test_optimizer_step_after_scaled_backward_is_flagged() -> None:
    code = (
        TRAIN_SETUP
        + """
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(model(x), torch.zeros(4, 2))
    scaler.scale(loss).backward()
    opt.step()
    """
    )
    _, report = explain(code)

    [misuse] = events(report, "misuse")
    assert misuse["line"] == line_of(code, "opt.step()")
    assert "scaler.step(optimizer)" in misuse["message"]


def test_a_correct_loop_reports_every_step_taken() -> None:
    code = (
        TRAIN_SETUP
        + """
    for _ in range(5):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x), torch.zeros(4, 2))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    """
    )
    _, report = explain(code)

    assert not events(report, "misuse") and not events(report, "error")
    [step] = events(report, "step")
    assert step["taken"] is True and step["count"] == 5
    assert any("all 5 optimizer steps" in s for s in report["summary"])


# --- size, folding, plumbing --------------------------------------------------------------------


def test_a_thousand_step_loop_gives_a_small_folded_report() -> None:
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


def test_report_is_plain_json() -> None:
    _, report = explain(LINEAR.format(dtype="float16"))
    assert json.loads(json.dumps(report, allow_nan=False)) == report
    assert set(report) >= {"summary", "ops", "ops_truncated", "ops_total", "scaler", "hazards"}


def test_tracing_is_installed_only_inside_the_with_block_and_exceptions_pass_through() -> None:
    scale = torch.amp.GradScaler.scale
    explainer = Explainer()
    assert torch.amp.GradScaler.scale is scale  # constructing installs nothing
    with pytest.raises(ZeroDivisionError), explainer:
        assert torch.amp.GradScaler.scale is not scale
        code = "import torch\ntorch.ones(2).sum()\n1 / 0\n"
        exec(compile(code, "<snippet>", "exec"), {})  # noqa: S102
    assert torch.amp.GradScaler.scale is scale
    assert torch._C._len_torch_function_stack() == 0
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None
    report = explainer.report(exception=None)  # falls back to the exception seen on exit
    assert report["error"]["type"] == "ZeroDivisionError"
    assert report["error"]["line"] == 3
    assert "ZeroDivisionError" in report["summary"][0] and "line 3" in report["summary"][0]


def test_print_output_is_untouched() -> None:
    stdout, report = explain("""
        import torch
        x = torch.ones(2, 2)
        print(x)
        print(x.dtype, x.shape)
    """)
    assert stdout == "tensor([[1., 1.],\n        [1., 1.]])\ntorch.float32 torch.Size([2, 2])\n"
    assert not [op for op in report["ops"] if "repr" in op["name"] or "format" in op["name"]]
