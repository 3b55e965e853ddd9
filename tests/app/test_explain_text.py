"""The terminal rendering of an explanation report: summary first, an aligned op table, then lists."""

from __future__ import annotations

from app.explain_text import format_explanation

REPORT = {
    "summary": [
        (
            "torch.nn.functional.linear on line 5 ran in float16 because autocast (cpu, float16) cast "
            "its float32 inputs."
        ),
        (
            "GradScaler skipped the optimizer step on line 9 because the gradients held inf/NaN, and "
            "update() halved the scale from 65536 to 32768."
        ),
    ],
    "ops": [
        {
            "name": "torch.nn.functional.linear",
            "line": 5,
            "count": 100,
            "inputs": [
                {"dtype": "float32", "shape": [4, 8], "device": "cpu"},
                {"dtype": "float32", "shape": [2, 8], "device": "cpu"},
                {"dtype": "float32", "shape": [2], "device": "cpu"},
            ],
            "output": {"dtype": "float16", "shape": [4, 2], "device": "cpu"},
            "autocast": {"device_type": "cpu", "dtype": "float16"},
            "casts": [
                {"from": "float32", "to": "float16", "shape": [4, 8]},
                {"from": "float32", "to": "float16", "shape": [2, 8]},
                {"from": "float32", "to": "float16", "shape": [2]},
            ],
            "reason": "cast to float16 by autocast",
        },
        {
            "name": "Tensor.sum",
            "line": 12,
            "count": 1,
            "inputs": [{"dtype": "float16", "shape": [4096], "device": "cpu"}],
            "output": {"dtype": "float16", "shape": [], "device": "cpu"},
            "autocast": None,
            "casts": [],
            "reason": "outside autocast: follows its input (float16)",
        },
    ],
    "ops_truncated": False,
    "ops_total": 2,
    "scaler": [
        {"event": "scale", "line": 7, "scale": 65536.0, "count": 1},
        {"event": "step", "line": 9, "taken": False, "count": 1},
        {
            "event": "update",
            "line": 10,
            "old_scale": 65536.0,
            "new_scale": 32768.0,
            "change": "halved",
            "count": 1,
        },
    ],
    "hazards": [
        {
            "kind": "overflow",
            "line": 12,
            "op": "Tensor.sum",
            "count": 1,
            "message": "Tensor.sum on line 12 overflowed in float16 (float16 max is 65504).",
        },
    ],
}


def test_sections_come_in_order_with_the_summary_first() -> None:
    text = format_explanation(REPORT)
    lines = text.splitlines()
    assert lines[0] == "What happened"
    assert lines[1].strip() == REPORT["summary"][0]
    positions = [text.index(h) for h in ("What happened", "\nOps", "\nGradScaler", "\nHazards")]
    assert positions == sorted(positions)


def test_op_table_is_aligned_and_shows_folding() -> None:
    lines = format_explanation(REPORT).splitlines()
    start = lines.index("Ops")
    header, rule, linear, total = lines[start + 1 : start + 5]
    for column in ("line", "op", "inputs", "output", "autocast", "casts", "reason"):
        assert column in header
    # every column starts at the same place in each row
    for column, cell in (
        ("op", "torch.nn.functional.linear"),
        ("output", "float16 [4, 2]"),
        ("reason", "cast to float16 by autocast"),
    ):
        assert linear.index(cell) == header.index(column)
    assert set(rule.strip()) <= {"-", " "}
    assert "float32, float32, float32" in linear
    assert "cpu/float16" in linear and "3× float32→float16" in linear
    assert linear.rstrip().endswith("× 100")
    assert "off" in total and "× " not in total


def test_scaler_events_and_hazards_are_listed() -> None:
    text = format_explanation(REPORT)
    assert "scale=65536" in text
    assert "SKIPPED" in text
    assert "65536 → 32768 (halved)" in text
    assert "overflow" in text and "65504" in text


def test_an_empty_report_still_renders() -> None:
    assert "Nothing to explain" in format_explanation({})
    text = format_explanation(
        {"summary": ["Only a sentence."], "ops": [], "scaler": [], "hazards": []}
    )
    assert text == "What happened\n  Only a sentence.\n"


def test_the_mechanisms_fields_read_in_the_table_and_the_events() -> None:
    """Cached casts in the casts column, a compiled graph's rows marked, a step an optimizer
    skipped itself and a step on an unscaled loss each said in words."""
    op = {"line": 9, "count": 3, "inputs": [], "output": None, "autocast": None, "casts": [],
          "reason": "r", "name": "torch.nn.functional.linear"}  # fmt: skip
    cached = {**op, "reused": [{"dtype": "bfloat16", "shape": [4, 4], "line": 7}] * 2,
              "casts": [{"from": "float32", "to": "bfloat16", "shape": [2, 4]}]}  # fmt: skip
    compiled = {
        **op,
        "line": 12,
        "region": {"kind": "compiled", "text": "in a torch.compile graph"},
    }
    report = {
        "summary": [],
        "ops": [cached, compiled],
        "scaler": [
            {
                "event": "step",
                "line": 8,
                "count": 1,
                "taken": True,
                "in_optimizer": True,
                "found_inf": True,
                "unchanged": True,
                "state_created": 1,
            },
            {"event": "step", "line": 18, "count": 1, "taken": True, "unscaled_loss": True},
        ],
        "hazards": [],
    }
    text = format_explanation(report)
    assert "1× float32→bfloat16, 2× cached (line 7)" in text
    assert "graph × 3" in text
    assert (
        "optimizer.step() called with found_inf set: the optimizer skipped its update "
        "(parameters and moments unchanged; state created for 1)"
    ) in text
    assert "taken (its gradients came from an unscaled loss)" in text
