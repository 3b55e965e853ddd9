"""Each rule on a snippet where its pattern is present: the intended change, shown as a diff of
only that change, and a real run of the mutant (through the session's pool) showing what the
mistake does. And each rule on a near miss: it does not apply."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from app.mutate.apply import mutants_of, unified_diff
from app.mutate.rule import NotApplicable
from app.mutate.rules import RULES, rule
from app.mutate.run import MutationReport, Snippet, run_mutants
from sandbox import RunResult, Sandbox

TRAINING_LOOP = """\
import torch

model = torch.nn.Linear(2, 1, bias=False)
torch.nn.init.zeros_(model.weight)
opt = torch.optim.SGD(model.parameters(), lr=1.0)
scaler = torch.amp.GradScaler("cpu")
x = torch.tensor([[1.0, 1.0]])
for step in range(2):
    opt.zero_grad()
    scaler.scale(model(x).sum()).backward()  # the scaled loss
    scaler.step(opt)
    scaler.update()
print(model.weight.grad)
"""

GRADS_READ_BY_SCALE = """\
import torch

w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
scaler = torch.amp.GradScaler("cpu")
loss = (w * w).sum() / 2
scaler.scale(loss).backward()
print((w.grad / scaler.get_scale()).tolist())
"""

OVERFLOW_THEN_FINE = """\
import torch

w = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([w], lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for big in [1e35, 1.0]:
    opt.zero_grad()
    scaler.scale((w * big).sum()).backward()
    scaler.step(opt)
    scaler.update()
    print(scaler.get_scale())
"""

ACCUMULATION = """\
import torch

w = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([w], lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for x in ([1.0, 2.0], [3.0, 4.0]):
    scaler.scale((w * torch.tensor(x)).sum() / 2).backward()
scaler.step(opt)
scaler.update()
print(w.tolist(), scaler.get_scale())
"""

CLIPPING = """\
import torch

w = torch.nn.Parameter(torch.tensor([1.0, 1.0]))
opt = torch.optim.SGD([w], lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scaler.scale((w * torch.tensor([3.0, 4.0])).sum()).backward()
scaler.unscale_(opt)
norm = torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)
print(norm.item(), [round(g, 6) for g in w.grad.tolist()])
"""

ONE_STEP = """\
import torch

w = torch.nn.Parameter(torch.tensor([1.0]))
opt = torch.optim.SGD([w], lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scaler.scale((w * 2.0).sum()).backward()
scaler.step(opt)
print(round(w.item(), 4))
"""

SCALE_OF = """\
import torch

scaler = torch.amp.GradScaler("cpu")
loss = torch.tensor(2.0)
print(scaler.scale(loss).item(), scaler.get_scale())
"""

BASELINE = """\
import torch

use_amp = False
with torch.autocast("cpu", enabled=use_amp):
    y = torch.nn.Linear(2, 2)(torch.ones(1, 2))
print(y.dtype)
"""

REGION = """\
import torch

layer = torch.nn.Linear(4, 2)
with torch.autocast("cpu", dtype=torch.bfloat16):
    # the forward pass
    y = layer(torch.ones(1, 4))
print(y.dtype)
"""

BACKWARD_AFTER = """\
import torch

torch.manual_seed(0)
layer = torch.nn.Linear(4, 2)
with torch.autocast("cpu", dtype=torch.bfloat16):
    y = layer(torch.ones(1, 4))
loss = y.float().sum()
loss.backward()
print(loss.dtype, layer.weight.grad.dtype, layer.weight.grad.sum().item())
"""


def stdout_floats(run: RunResult) -> list[float]:
    return [float(v) for v in run.stdout.strip().strip("[]").split(",")]


@dataclass
class Case:
    rule: str
    code: str
    before: str
    """Text of the original that the mutant changes…"""
    after: str
    """…and what it becomes."""
    shows: Callable[[RunResult, RunResult], None]
    """Checks the mutant's run (given the original's)."""
    label: str = ""
    cpu_only: bool = False
    """What the run shows holds on a host without CUDA (a device swap)."""


def raises(
    kind: str, fragment: str, line: int | None = None
) -> Callable[[RunResult, RunResult], None]:
    def check(original: RunResult, mutant: RunResult) -> None:
        assert original.status == "ok", original
        assert mutant.exception is not None and mutant.exception.type == kind, mutant
        assert fragment in mutant.exception.message
        if line is not None:
            assert mutant.exception.line == line

    return check


def prints(text: str) -> Callable[[RunResult, RunResult], None]:
    def check(original: RunResult, mutant: RunResult) -> None:
        assert original.status == "ok" and mutant.status == "ok", (original, mutant)
        assert mutant.stdout == text and original.stdout != text

    return check


def sixty_five_thousand_times_smaller(original: RunResult, mutant: RunResult) -> None:
    assert original.stdout == "[3.0, 4.0]\n"
    assert [v * 65536 for v in stdout_floats(mutant)] == stdout_floats(original)


def clips_the_scaled_norm(original: RunResult, mutant: RunResult) -> None:
    assert original.stdout.startswith("5.0 [0.6, 0.8]")
    assert mutant.stdout.startswith("327680.0 ")  # the norm of gradients still multiplied by 65536


def steps_with_scaled_gradients(original: RunResult, mutant: RunResult) -> None:
    assert original.stdout == "0.8\n"
    assert float(mutant.stdout) < -13000  # 1 - 0.1 * 2 * 65536


def disabled(original: RunResult, mutant: RunResult) -> None:
    assert original.stdout == "131072.0 65536.0\n" and mutant.stdout == "2.0 1.0\n"


def disabled_for_want_of_cuda(original: RunResult, mutant: RunResult) -> None:
    disabled(original, mutant)
    assert any("CUDA is not available" in w.message for w in mutant.warnings)


def autocast_off_for_want_of_cuda(original: RunResult, mutant: RunResult) -> None:
    assert original.stdout == "torch.bfloat16\n" and mutant.stdout == "torch.float32\n"
    assert any("CUDA is not available" in w.message for w in mutant.warnings)


def loss_stays_bfloat16(original: RunResult, mutant: RunResult) -> None:
    assert original.stdout.startswith("torch.float32 torch.float32 ")
    assert mutant.stdout.startswith(
        "torch.bfloat16 torch.float32 "
    )  # the parameters' grads stay float32


def same_output(original: RunResult, mutant: RunResult) -> None:
    assert original.status == mutant.status == "ok" and mutant.stdout == original.stdout


CASES = [
    Case("drop-scale", TRAINING_LOOP, "    scaler.scale(model(x).sum()).backward()  # the scaled loss",
         "    model(x).sum().backward()  # the scaled loss",
         raises("AssertionError", "_scale is None", line=11), "training loop: raises on the first iteration"),
    Case("drop-scale", GRADS_READ_BY_SCALE, "scaler.scale(loss).backward()", "loss.backward()",
         sixty_five_thousand_times_smaller, "gradients read by the scale: 65536x too small"),
    Case("drop-update", OVERFLOW_THEN_FINE, "    scaler.update()\n", "",
         raises("RuntimeError", "step() has already been called since the last update()", line=9)),
    Case("update-in-inner-loop", ACCUMULATION,
         "backward()\nscaler.step(opt)\nscaler.update()\n", "backward()\n    scaler.update()\nscaler.step(opt)\n",
         raises("AssertionError", "No inf checks were recorded prior to update", line=8)),
    Case("clip-before-unscale", CLIPPING,
         "scaler.unscale_(opt)\nnorm = torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)\n",
         "norm = torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)\nscaler.unscale_(opt)\n", clips_the_scaled_norm),
    Case("drop-unscale", CLIPPING, "scaler.unscale_(opt)\n", "", clips_the_scaled_norm),
    Case("optimizer-step", ONE_STEP, "scaler.step(opt)", "opt.step()", steps_with_scaled_gradients),
    Case("scaler-disabled", SCALE_OF, 'GradScaler("cpu")', 'GradScaler("cpu", enabled=False)', disabled),
    Case("swap-scaler-device", SCALE_OF, 'GradScaler("cpu")', 'GradScaler("cuda")', disabled_for_want_of_cuda,
         cpu_only=True),
    Case("deprecated-cuda-scaler", SCALE_OF, 'torch.amp.GradScaler("cpu")', "torch.cuda.amp.GradScaler()",
         disabled_for_want_of_cuda, cpu_only=True),
    Case("drop-enabled-flag", BASELINE, ", enabled=use_amp)", ")", prints("torch.bfloat16\n")),
    Case("drop-autocast", REGION,
         'with torch.autocast("cpu", dtype=torch.bfloat16):\n    # the forward pass\n    y = layer(torch.ones(1, 4))\n',
         "# the forward pass\ny = layer(torch.ones(1, 4))\n", prints("torch.float32\n")),
    Case("swap-autocast-dtype", REGION, "dtype=torch.bfloat16", "dtype=torch.float16", prints("torch.float16\n")),
    Case("swap-autocast-device", REGION, 'autocast("cpu"', 'autocast("cuda"', autocast_off_for_want_of_cuda,
         cpu_only=True),
    Case("backward-inside-autocast", BACKWARD_AFTER,
         "    y = layer(torch.ones(1, 4))\nloss = y.float().sum()\nloss.backward()\n",
         "    y = layer(torch.ones(1, 4))\n    loss = y.float().sum()\n    loss.backward()\n", same_output),
    Case("drop-float-casts", BACKWARD_AFTER, "y.float().sum()", "y.sum()", loss_stays_bfloat16),
]  # fmt: skip


def case_id(case: Case) -> str:
    return f"{case.rule}: {case.label}" if case.label else case.rule


@pytest.fixture(scope="module")
def reports(sandbox_pool: Sandbox) -> list[MutationReport]:
    """Every case's original and its one mutant, run once, in parallel through the session's pool."""
    snippets = [Snippet(c.code, rules=(rule(c.rule),)) for c in CASES]  # type: ignore[arg-type]
    return run_mutants(snippets, sandbox_pool)


def test_every_rule_has_a_case_and_says_what_it_is() -> None:
    assert {c.rule for c in CASES} == {r.name for r in RULES}
    assert len({r.name for r in RULES}) == len(RULES)
    for r in RULES:
        assert r.name and r.title and r.explanation.endswith("."), r


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_rule_makes_its_change_and_nothing_else(case: Case) -> None:
    assert case.before in case.code
    expected = case.code.replace(case.before, case.after, 1)
    (mutant,) = mutants_of(case.code, (rule(case.rule),))  # type: ignore[arg-type]
    assert mutant.code == expected
    assert not mutant.normalised
    assert mutant.diff == unified_diff(case.code, expected, case.rule)
    changed = [line for line in mutant.diff.splitlines()[2:] if line[:1] in "+-"]
    assert changed and all(
        line[1:] in case.code.splitlines() + expected.splitlines() for line in changed
    )


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_mutant_runs_and_shows_what_the_mistake_does(
    case: Case, reports: list[MutationReport], sandbox_pool: Sandbox
) -> None:
    if case.cpu_only and sandbox_pool.environment.get("device_kind") == "cuda":
        pytest.skip("what this swap shows is a host without CUDA")
    report = reports[CASES.index(case)]
    (ran,) = report.mutants
    assert ran.mutant.rule.name == case.rule
    case.shows(report.original, ran.run)
    assert ran.visible_effect == (case.shows is not same_output)


def test_the_training_loop_without_scale_raises_on_its_first_iteration(
    reports: list[MutationReport],
) -> None:
    """As the run's explanation says it: the step of the first iteration found no scale."""
    run = reports[0].mutants[0].run
    assert run.stdout == ""  # nothing after the loop ran
    summary = " ".join((run.explanation or {}).get("summary", []))
    assert "scaler.scale(loss) was never called" in summary


NEAR_MISSES = {
    "drop-scale": "import torch\nclass Box:\n    def scale(self, x):\n        return x\nbox = Box()\nprint(box.scale(2))\n",
    "drop-update": "import torch\nd = {}\nd.update(a=1)\nscaler = torch.amp.GradScaler('cpu')\nprint(d)\n",
    "update-in-inner-loop": TRAINING_LOOP,  # update() is already in the loop with backward()
    "clip-before-unscale": "import torch\nw = torch.nn.Parameter(torch.ones(2))\nscaler = torch.amp.GradScaler('cpu')\n"
                           "scaler.scale(w.sum()).backward()\ntorch.nn.utils.clip_grad_norm_([w], 1.0)\n",
    "drop-unscale": ONE_STEP,
    "optimizer-step": "import torch\nw = torch.nn.Parameter(torch.ones(1))\nopt = torch.optim.SGD([w], lr=0.1)\n"
                      "w.sum().backward()\nopt.step()\n",
    "scaler-disabled": "import torch\nscaler = torch.amp.GradScaler('cpu', enabled=False)\n",
    "swap-scaler-device": "import torch\ndevice = 'cpu'\nscaler = torch.amp.GradScaler(device)\n",
    "deprecated-cuda-scaler": "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
    "drop-enabled-flag": "import torch\nscaler = torch.amp.GradScaler('cpu', enabled=True)\n"
                         "with torch.autocast('cpu'):\n    pass\n",
    "drop-autocast": "import torch\nwith torch.no_grad():\n    y = torch.ones(2) * 2\n",
    "swap-autocast-dtype": "import torch\nwith torch.autocast('cpu', dtype=torch.float32):\n    pass\n"
                           "def f(device):\n    with torch.autocast(device):\n        pass\n",
    "swap-autocast-device": "import torch\ndef f(device):\n    with torch.autocast(device_type=device):\n        pass\n",
    "backward-inside-autocast": "import torch\nw = torch.nn.Parameter(torch.ones(2))\n"
                                "with torch.autocast('cpu'):\n    loss = (w * 2).sum()\n    loss.backward()\n",
    "drop-float-casts": "import torch\nx = float(torch.ones(1).item())\ny = torch.ones(2).double()\n",
}  # fmt: skip


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_a_rule_does_not_apply_where_its_pattern_is_absent(name: str) -> None:
    r = rule(name)
    assert r is not None
    tree = ast.parse(NEAR_MISSES[name])
    assert not r.applies(tree)
    with pytest.raises(NotApplicable):
        r.apply(tree)
    assert mutants_of(NEAR_MISSES[name], (r,)) == ()


def test_no_rule_applies_to_code_without_amp() -> None:
    assert mutants_of("import torch\nprint(torch.ones(2).sum())\n") == ()
    assert set(NEAR_MISSES) == {r.name for r in RULES}
