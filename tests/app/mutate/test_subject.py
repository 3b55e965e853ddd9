"""What a "GradScaler question" is: code that uses a GradScaler in a training step (any spelling
of the scaler); not code that only builds one and reads it back, nor code without one."""

from __future__ import annotations

import pytest

from app.mutate.subject import is_gradscaler_question

STEPS = {
    "scale and step": """\
import torch
w = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([w], lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scaler.scale(w.sum()).backward()
scaler.step(opt)
scaler.update()
""",
    "old spelling, imported bare": """\
import torch
from torch.cuda.amp import GradScaler
w = torch.nn.Parameter(torch.ones(2))
scaler = GradScaler()
scaler.scale(w.sum()).backward()
""",
    "a scaler passed to a helper": """\
import torch

def step(grad_scaler, opt):
    grad_scaler.unscale_(opt)
    grad_scaler.step(opt)

w = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([w], lr=0.1)
step(torch.amp.GradScaler("cpu"), opt)
""",
}

NOT_STEPS = {
    "the default device, read back": """\
import torch
scaler = torch.amp.GradScaler()
print(scaler.is_enabled(), scaler.get_scale())
""",
    "the old spelling, read back": """\
import torch
from torch.cuda.amp import autocast, GradScaler
scaler = GradScaler()
with autocast():
    pass
print(isinstance(scaler, torch.amp.GradScaler), scaler.is_enabled())
""",
    "a step, but no GradScaler": """\
import torch
w = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([w], lr=0.1)
w.sum().backward()
opt.step()
""",
    "does not parse": "scaler = torch.amp.GradScaler(\n",
}


@pytest.mark.parametrize("code", STEPS.values(), ids=STEPS.keys())
def test_code_that_steps_with_a_scaler_is_one(code: str) -> None:
    assert is_gradscaler_question(code)


@pytest.mark.parametrize("code", NOT_STEPS.values(), ids=NOT_STEPS.keys())
def test_code_that_only_builds_a_scaler_or_has_none_is_not(code: str) -> None:
    assert not is_gradscaler_question(code)
