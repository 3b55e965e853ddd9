"""On a CUDA host only (`pytest -m gpu`): runs on the GPU, and a CUDA OOM stays inside its run.

Deselected by default (pyproject's addopts), because this machine and CI have no GPU.
"""

from __future__ import annotations

import pytest

from sandbox import Sandbox
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
