"""An explained run (the one learners are shown, and keys are checked against) prints what a
fresh `python` prints: the explainer's own work is unseen by the snippet. Each snippet in
`unseen/` once printed something else explained, found by an AMP expert's review:

- batch_norm_running_stats: a check re-ran batch norm in float32 and updated the running
  statistics a second time;
- logging_tensor_subclass: a `__torch_dispatch__` subclass logged the checks' `abs`, `aminmax`,
  `item` after every op;
- profiler_counts, function_mode_around_gradscaler: the GradScaler monitor's reads of the scale
  were profiled, and logged by the snippet's TorchFunctionMode;
- recorded_warnings: a check re-running `torch.tensor(t)` added a warning to the snippet's
  `catch_warnings(record=True)`;
- composite_ops_under_autocast: `F.bilinear`, `torch.linalg.pinv`, `torch.sparse.mm` computed in
  float32 under the explainer's dispatch mode where autocast alone computes them in bfloat16;
- warnings_hook_deleted: a snippet that deleted `warnings._showwarnmsg` broke the explainer's
  pause half-way, and its tensor subclass's `__torch_function__` stayed off for the rest of the run;
- accumulation_loop: 100,000 float16 additions (the classic "it stops at 256") ran out of the
  learners' 10 s explained, checked after every step; 0.3 s plainly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox

SNIPPETS = Path(__file__).with_name("unseen")


@pytest.mark.parametrize("name", sorted(p.stem for p in SNIPPETS.glob("*.snippet")))
def test_an_explained_run_prints_what_a_fresh_python_prints(
    sandbox_pool: Sandbox, name: str, tmp_path: Path
) -> None:
    code = (SNIPPETS / f"{name}.snippet").read_text()
    (tmp_path / "snippet.py").write_text(code)
    # One thread, as a run has (the profiler's counts and a float32 sum's digits depend on it).
    fresh = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, check=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    r = sandbox_pool.run(code, Limits(wall_s=10), explain=True)
    assert r.status == "ok", (r.status, r.message)
    assert r.stdout == fresh.stdout
    assert r.explanation is not None and not r.explanation.get("error"), r.explanation.get("error")


def test_a_loops_hazard_is_still_found_when_its_checks_thin_out(sandbox_pool: Sandbox) -> None:
    """Past its first calls, an op's results in a loop are checked at its 2**k-th calls only: the
    sum that stops growing at 256 (after ~2,500 steps) is still reported."""
    r = sandbox_pool.run(
        (SNIPPETS / "accumulation_loop.snippet").read_text(), Limits(wall_s=10), explain=True
    )
    absorbed = [h for h in r.explanation["hazards"] if h["kind"] == "absorption"]
    assert absorbed and absorbed[0]["line"] == 4 and "256 + 0.1 = 256" in absorbed[0]["message"], (
        r.explanation["hazards"]
    )
