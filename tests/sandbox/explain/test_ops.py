"""Explanations, the op trace: which call ran in which dtype, the casts autocast inserted, and why."""

from __future__ import annotations

import pytest

from tests.support.explain import (
    DTYPES,
    LINEAR,
    Explain,
    line_of,
    ops_named,
)

# --- autocast: casts and reasons ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_under_autocast_shows_three_casts_and_low_precision_output(
    explain: Explain, dtype: str
) -> None:
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
def test_mse_loss_on_low_precision_output_runs_in_float32(explain: Explain, dtype: str) -> None:
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
def test_summary_starts_with_the_autocast_cast_and_its_line(explain: Explain, dtype: str) -> None:
    code = LINEAR.format(dtype=dtype)
    _, report = explain(code)

    first = report["summary"][0]
    assert "torch.nn.functional.linear" in first
    assert f"line {line_of(code, 'out = model(x)')}" in first
    assert dtype in first and "autocast" in first
    assert 1 <= len(report["summary"]) <= 4


def test_ops_outside_autocast_say_so(explain: Explain) -> None:
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
    # The summary names what changed a dtype (the explicit cast), not the matmul that kept one.
    assert (
        report["summary"][0]
        == "Tensor.half on line 5 converted its input to float16 explicitly; no autocast was involved."
    )


def test_mixed_dtypes_outside_autocast_are_promoted(explain: Explain) -> None:
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


def test_module_defined_in_the_snippet_reports_the_line_inside_forward(explain: Explain) -> None:
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


def test_casts_are_seen_under_inference_mode_too(explain: Explain) -> None:
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


def test_autocast_promote_ops_are_not_called_float32_ops(explain: Explain) -> None:
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


def test_failed_op_is_traced_and_the_mismatch_explained(explain: Explain) -> None:
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


def test_the_whole_sandbox_package_counts_as_the_tracers_own_frames() -> None:
    """A call made through the sandbox's own code (any module, subpackages included) is traced at
    the snippet line beyond it; library code stops the walk, whatever its file is named."""
    import inspect

    import torch

    from sandbox import execute, frames, runner
    from sandbox.explain import calls, explainer, ops, scaler

    for module in (execute, frames, runner, calls, explainer, ops, scaler):
        assert calls._classify(module.__file__) == calls._TRANSPARENT, module.__name__
    root = frames.SANDBOX_ROOT
    for outside in (
        inspect.getfile(torch.optim.SGD),
        root + "_evil/explain.py",
        root + "/../tests/explain.py",
    ):
        assert calls._classify(outside) == calls._INTERNAL, outside


def test_a_shape_error_is_not_blamed_on_mixed_dtypes(explain: Explain) -> None:
    _, report = explain("""
    import torch
    x = torch.ones(2, 3)
    y = torch.ones(2, 3, dtype=torch.float16)
    print(x @ y)
    """)
    assert "cannot be multiplied" in report["error"]["message"]
    assert report["error"]["explanation"] is None
    assert not any("mix" in s for s in report["summary"]), report["summary"]


def test_why_an_op_autocast_cast_nothing_for_says_what_did_decide(explain: Explain) -> None:
    """The trace said "follows its input" of mm on float64 (mm is on autocast's list: float64 is
    what autocast never casts), and "returned float16 under autocast" of a sum asked for float16
    and of a layer norm keeping its bfloat16 input, as if autocast had chosen those dtypes."""
    code = (
        "import torch\na = torch.rand(4, 4)\nw = torch.ones(4)\n"
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "    x = torch.mm(a.double(), a.double())\n"
        "    s = a.sum(dtype=torch.float16)\n"
        "    n = torch.nn.functional.layer_norm(a.bfloat16(), (4,), w, w)\n"
    )
    _, report = explain(code)
    [mm] = ops_named(report, "torch.mm")
    assert (
        mm["reason"]
        == "its inputs are float64, which autocast never casts: it casts only float32, float16 and bfloat16 ones"
    )
    [total] = ops_named(report, "Tensor.sum")
    assert (
        total["reason"]
        == "autocast cast none of its inputs; the op itself made float16 (as a dtype= argument does)"
    )
    [norm] = ops_named(report, "torch.nn.functional.layer_norm")
    assert norm["reason"] == "keeps its bfloat16 input's dtype; autocast cast none of its inputs"


def test_summary_contrasts_an_op_run_with_autocast_off(explain: Explain) -> None:
    """A nested `autocast(enabled=False)` is what such a snippet shows; the summary named only the
    op autocast cast (a newcomer's walk), not the same op, a line later, left in float32."""
    code = (
        "import torch\n"
        "a = torch.rand(4, 4)\n"
        'with torch.autocast("cpu", dtype=torch.bfloat16):\n'
        "    b = torch.mm(a, a)\n"
        '    with torch.autocast("cpu", enabled=False):\n'
        "        c = torch.mm(a, a)\n"
        "print(b.dtype, c.dtype)\n"
    )
    stdout, report = explain(code)
    assert stdout == "torch.bfloat16 torch.float32\n"
    assert report["summary"][1] == (
        "torch.mm on line 6 ran with autocast off, so it returned float32, its inputs' dtype, "
        "where under autocast on line 4 it returned bfloat16."
    )


def test_summary_names_an_explicit_cast_before_an_op_that_kept_its_dtype(explain: Explain) -> None:
    code = "import torch\nx = torch.ones(2, 3)\ny = x.reshape(3, 2)\nz = y.half()\nprint(z.dtype)\n"
    _, report = explain(code)
    assert any("line 4" in s and "explicitly" in s and "float16" in s for s in report["summary"]), (
        report["summary"]
    )
