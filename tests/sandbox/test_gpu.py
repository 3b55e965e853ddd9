"""On a CUDA host only (`pytest -m gpu`): runs on the GPU; a CUDA OOM, a device-side assert and a
run's GPU memory stay inside its run; GradScaler with gradients that really overflow.

Deselected by default (pyproject's addopts), because this machine and CI have no GPU.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from sandbox import Limits, Sandbox
from tests.support.explain import events
from tests.support.pool import assert_still_works

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu(sb: Sandbox) -> Sandbox:
    if sb.environment.get("device_kind") != "cuda":
        pytest.fail("pytest -m gpu needs a CUDA host: this sandbox found no GPU")
    return sb


def test_cuda_snippet_runs_and_reports_the_device(gpu: Sandbox) -> None:
    r = gpu.run(
        "import torch\na = torch.rand(8, 8, device='cuda')\nwith torch.autocast('cuda'):\n    print(torch.mm(a, a).dtype, a.device)",
        device="cuda",
    )
    assert r.status == "ok", r
    assert r.stdout == "torch.float16 cuda:0\n"
    assert r.environment.device_kind == "cuda" and r.environment.device_name
    assert r.environment.cuda_version


def test_cuda_out_of_memory_stays_inside_its_run(gpu: Sandbox) -> None:
    r = gpu.run("import torch\nx = torch.empty(1 << 46, device='cuda')", device="cuda")
    assert r.status == "memory", r
    assert "OutOfMemoryError" in r.exception.type
    assert_still_works(gpu)
    again = gpu.run("import torch\nprint(torch.ones(3, device='cuda').sum().item())", device="cuda")
    assert again.stdout == "3.0\n", again


def test_autocast_linear_traced_on_cuda(gpu: Sandbox) -> None:
    code = (
        "import torch\nlayer = torch.nn.Linear(8, 4).cuda()\nx = torch.ones(2, 8, device='cuda')\n"
        "with torch.autocast('cuda', dtype=torch.float16):\n    y = layer(x)\n"
        "    loss = torch.nn.functional.mse_loss(y, torch.zeros_like(y))\nprint(y.dtype, loss.dtype)\n"
    )
    r = gpu.run(code, explain=True, device="cuda")
    assert r.stdout == "torch.float16 torch.float32\n", r
    ops = {op["name"]: op for op in r.explanation["ops"]}
    linear = ops["torch.nn.functional.linear"]
    assert linear["output"]["dtype"] == "float16" and len(linear["casts"]) == 3
    assert ops["torch.nn.functional.mse_loss"]["output"]["dtype"] == "float32"


# --- GradScaler on CUDA, with gradients that really overflow -----------------------------------

# A float16 matmul under autocast whose scaled gradient passes float16's largest value (65504):
# the gradient of the weight is made in float16 from 2 * y * 65536 / n, with y near 8000.
OVERFLOWING_STEP = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(8, 8).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
x = torch.full((8, 8), 1000.0, device="cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = model(x).float().pow(2).mean(){nan}
before = model.weight.detach().clone()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
grad = model.weight.grad
print(grad.isinf().any().item(), grad.isnan().any().item(), scaler.get_scale(), torch.equal(before, model.weight))
"""


@pytest.mark.parametrize(
    ("nan", "printed"),
    [
        ("", "True False 32768.0 True\n"),
        (" * torch.tensor(float('nan'), device='cuda')", "False True 32768.0 True\n"),
    ],
    ids=["inf", "nan"],
)
def test_gradscaler_skips_a_step_whose_cuda_gradients_overflowed(
    gpu: Sandbox, nan: str, printed: str
) -> None:
    code = OVERFLOWING_STEP.replace("{nan}", nan)
    r = gpu.run(code, explain=True, device="cuda")
    assert r.status == "ok", r
    assert r.stdout == printed, r
    report = r.explanation
    [check] = events(report, "inf_check")
    assert check["found_inf"] is True
    [step] = events(report, "step")
    assert step["taken"] is False
    [update] = events(report, "update")
    assert (update["old_scale"], update["new_scale"]) == (65536.0, 32768.0)


def test_binary_cross_entropy_is_refused_under_cuda_autocast(gpu: Sandbox) -> None:
    code = (
        "import torch\np = torch.rand(4, device='cuda')\n"
        "with torch.autocast('cuda', dtype=torch.float16):\n"
        "    torch.nn.functional.binary_cross_entropy(p, torch.ones(4, device='cuda'))\n"
    )
    r = gpu.run(code, device="cuda")
    assert r.status == "error" and r.exception.type.endswith("RuntimeError"), r
    assert "unsafe to autocast" in r.exception.message


# --- a run cannot harm the next one, or keep the GPU's memory -----------------------------------


def test_a_device_side_assert_does_not_poison_the_next_run(gpu: Sandbox) -> None:
    code = (
        "import torch\nx = torch.zeros(4, device='cuda')\n"
        "i = torch.tensor([40], device='cuda')\nprint(x[i].sum().item())\n"
    )
    r = gpu.run(code, device="cuda")
    assert r.status == "error", r
    assert "device-side assert" in r.exception.message or "out of bounds" in r.exception.message, r
    for _ in range(3):  # every runner prepared meanwhile, not just the next one
        again = gpu.run(
            "import torch\nprint(torch.arange(4, device='cuda').sum().item())", device="cuda"
        )
        assert again.status == "ok" and again.stdout == "6\n", again


def _gpu_memory_used_mib() -> int:
    """What the whole GPU holds, as nvidia-smi reads it (this process never starts CUDA)."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "--id=0"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return int(out.strip().splitlines()[0])


def _settled_memory_mib() -> int:
    """The GPU's memory once the pool has its runners prepared again: the same reading for 2 s."""
    readings: list[int] = []
    for _ in range(60):
        readings.append(_gpu_memory_used_mib())
        if len(readings) >= 5 and len(set(readings[-5:])) == 1:
            break
        time.sleep(0.5)
    return readings[-1]


def test_a_runs_gpu_memory_is_given_back_when_it_ends(gpu: Sandbox) -> None:
    baseline = _settled_memory_mib()
    big = gpu.run(
        "import torch\nx = torch.empty(8 << 30, dtype=torch.uint8, device='cuda')\n"
        "print(torch.cuda.memory_allocated() >> 30)",
        device="cuda",
    )
    assert big.status == "ok" and big.stdout == "8\n", big
    after = _settled_memory_mib()
    print(f"GPU memory used: {baseline} MiB before the run, {after} MiB after it")
    assert abs(after - baseline) < 256, (baseline, after)


def test_host_memory_is_capped_on_a_cuda_host(gpu: Sandbox) -> None:
    """A CUDA runner has no address-space rlimit (CUDA reserves far more than it uses), so the
    cgroup's memory cap is the only one: it must hold."""
    r = gpu.run(
        "b = bytearray(3 << 30)\nprint(len(b))", Limits(memory_bytes=1 << 30), device="cuda"
    )
    assert r.status == "memory", r
    assert_still_works(gpu)
