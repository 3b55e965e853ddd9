"""Explanations, numeric hazards: float16 overflow, underflow to zero, and absorbed additions."""

from __future__ import annotations

from tests.support.explain import (
    Explain,
    line_of,
)

# --- numeric hazards ----------------------------------------------------------------------------


def test_float16_sum_overflow_is_a_hazard_on_its_line(explain: Explain) -> None:
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


def test_bfloat16_sum_does_not_overflow(explain: Explain) -> None:
    code = """
        import torch
        s = torch.full((4096,), 16., dtype=torch.bfloat16).sum()
    """
    _, report = explain(code)
    assert report["hazards"] == []


def test_adding_a_small_number_to_float16_one_is_absorbed(explain: Explain) -> None:
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


def test_casting_a_tiny_value_to_float16_underflows(explain: Explain) -> None:
    code = """
        import torch
        u = torch.tensor(1e-8).half()
    """
    _, report = explain(code)

    [hazard] = report["hazards"]
    assert hazard["kind"] == "underflow"
    assert hazard["line"] == line_of(code, ".half()")
    assert hazard["op"] == "Tensor.half"


def test_a_literal_too_large_for_float16_overflows_where_it_is_created(explain: Explain) -> None:
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


def test_relu_zeros_and_division_by_zero_are_not_hazards(explain: Explain) -> None:
    code = """
        import torch
        x = torch.tensor([-1., 0., 2.], dtype=torch.float16)
        r = torch.relu(x)
        d = torch.tensor([1.], dtype=torch.float16) / torch.tensor([0.], dtype=torch.float16)
    """
    _, report = explain(code)
    assert report["hazards"] == []
