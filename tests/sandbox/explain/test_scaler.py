"""Explanations, GradScaler: its events, skipped steps, and the calls a snippet got wrong."""

from __future__ import annotations

import pytest

from tests.support.explain import (
    DTYPES,
    TRAIN_SETUP,
    Explain,
    events,
    line_of,
)

# --- GradScaler ---------------------------------------------------------------------------------


def test_step_without_scale_is_explained_as_the_missing_scale_call(explain: Explain) -> None:
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
def test_inf_gradient_skips_the_step_and_halves_the_scale(explain: Explain, dtype: str) -> None:
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


def test_backward_on_the_unscaled_loss_is_flagged(explain: Explain) -> None:
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


def test_optimizer_step_after_scaled_backward_is_flagged(explain: Explain) -> None:
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


def test_a_correct_loop_reports_every_step_taken(explain: Explain) -> None:
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


def test_events_stay_in_time_order_when_folded(explain: Explain) -> None:
    """Two steady iterations, one whose gradients overflow, then two more at the halved scale:
    the table reads in the order things happened, each repeat folded where it happened."""
    code = (
        TRAIN_SETUP
        + """
    for i in range(5):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.mse_loss(model(x), torch.zeros(4, 2))
        if i == 2:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    """
    )
    _, report = explain(code)
    seen = [(e["event"], e["count"]) for e in report["scaler"]]
    steps = [(e.get("taken"), e["count"]) for e in report["scaler"] if e["event"] == "step"]
    assert steps == [(True, 2), (False, 1), (True, 2)], seen
    updates = [
        (e["old_scale"], e["new_scale"], e["count"])
        for e in report["scaler"]
        if e["event"] == "update"
    ]
    assert updates == [(65536.0, 65536.0, 2), (65536.0, 32768.0, 1), (32768.0, 32768.0, 2)], seen
    kinds = [k for k, _ in seen]
    assert kinds.index("update") < kinds.index(
        "step", kinds.index("update")
    )  # no later step folded into the first block
