"""What a run reports: output, exceptions limited to the snippet, warnings, environment, JSON."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import Environment, Limits, RunResult, Sandbox

REPO = Path(__file__).resolve().parents[2]


def test_output_and_environment(sb: Sandbox) -> None:
    r = sb.run(
        "import torch\nwith torch.autocast('cpu', dtype=torch.float16):\n    print(torch.nn.Linear(2, 2)(torch.ones(1, 2)).dtype)"
    )
    assert r.status == "ok" and r.stdout == "torch.float16\n"
    import torch

    assert r.environment.torch_version == torch.__version__.split("+")[0]
    # The host's: a CUDA host's runners have started CUDA, whatever device the snippet uses.
    assert r.environment.device_kind == ("cuda" if torch.cuda.is_available() else "cpu")
    assert r.duration_ms > 0


def test_exception_shows_only_the_snippet_frames(sb: Sandbox) -> None:
    r = sb.run("import torch\n\ntorch.mm(torch.ones(2, 2), torch.ones(2, 2).half())\n")
    assert r.status == "error"
    assert r.exception.type == "RuntimeError"
    assert "same dtype" in r.exception.message
    assert r.exception.line == 3
    assert r.exception.source_line.startswith("torch.mm(")
    assert "sandbox" not in r.exception.traceback  # no frames of our own machinery
    assert '"<snippet>", line 3' in r.exception.traceback


def test_syntax_error_points_at_line(sb: Sandbox) -> None:
    r = sb.run("x = 1\nif x\n    print(x)\n")
    assert r.status == "error" and r.exception.type == "SyntaxError" and r.exception.line == 2


def test_deprecation_warnings_are_captured_with_their_line(sb: Sandbox) -> None:
    r = sb.run("import torch\n\nscaler = torch.cuda.amp.GradScaler()\n")
    cats = {(w.category, w.line) for w in r.warnings}
    assert ("FutureWarning", 3) in cats, r.warnings
    assert any("torch.amp.GradScaler('cuda', args...)" in w.message for w in r.warnings)


WARNING_PRONE = """\
import warnings
import torch
for i in range(3):
    warnings.warn("careful")
with warnings.catch_warnings(record=True) as caught:
    for i in range(3):
        warnings.warn("again")
print(len(caught))
exec(compile('import warnings\\nwarnings.warn("old", DeprecationWarning)', "lib", "exec"), {"__name__": "lib"})
warnings.warn("torch::jit::fuser::cuda is gone")
warnings.warn("mine", DeprecationWarning)
warnings.warn("closed", ResourceWarning)
scaler = torch.cuda.amp.GradScaler()
print(len(warnings.filters))
x = torch.randn(2, 3)
with warnings.catch_warnings(record=True) as per_line:
    torch.nn.functional.softmax(x)
    torch.nn.functional.softmax(x)
    torch.tensor(x.requires_grad_())
    torch.tensor(x)
print(len(per_line), [w.lineno for w in per_line])
torch.nn.functional.softmax(x)
torch.nn.functional.softmax(x)
"""


@pytest.mark.parametrize("explain", [False, True], ids=["plain", "explained"])
def test_warnings_are_those_a_fresh_python_shows(
    sb: Sandbox, tmp_path: Path, explain: bool
) -> None:
    """A snippet runs under the warning filters of a fresh `python snippet.py` that imported
    torch: a warning raised in a loop is shown (and recorded) once, library deprecations and
    ResourceWarnings stay hidden, torch's own filters hold. Under the filter "always" the run
    counted 3 where Python counts 1, and showed warnings a learner's Python never shows.
    Explained (as learners are shown a question's run), each warning is still at the line that
    raised it: called from the explainer's frame, torch's "at the caller" warnings all named its
    line, so the same warning from two lines was shown once, and counted once."""
    script = tmp_path / "snippet.py"
    script.write_text(WARNING_PRONE)
    fresh = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True
    )
    shown = sorted(
        (m[3], m[4]) for m in re.finditer(r"^(.*?):(\d+): (\w+): (.*)$", fresh.stderr, re.MULTILINE)
    )
    r = sb.run(WARNING_PRONE, explain=explain)
    assert r.status == "ok", r.message
    assert r.stdout == fresh.stdout and r.stdout.startswith("1\n") and "4 [" in r.stdout
    assert sorted((w.category, w.message) for w in r.warnings) == shown
    assert {w.message for w in r.warnings} >= {"careful", "mine"}
    assert not {"old", "closed", "torch::jit::fuser::cuda is gone"} & {
        w.message for w in r.warnings
    }


SCRIPT_LIKE = """\
from __future__ import annotations
import argparse, pickle, sys, typing
from dataclasses import dataclass, fields
import torch
class TinyNet(torch.nn.Module):
    def __init__(self): super().__init__(); self.fc = torch.nn.Linear(2, 2, dtype=torch.bfloat16)
torch.save(TinyNet(), "model.pt")
print(torch.load("model.pt", weights_only=False).fc.weight.dtype)
@dataclass
class AmpConfig:
    supported: typing.ClassVar[tuple] = ("float16", "bfloat16")
    dtype: torch.dtype = torch.float16
print([f.name for f in fields(AmpConfig)], typing.get_type_hints(AmpConfig)["dtype"])
print(getattr(torch, argparse.ArgumentParser().parse_args().__dict__.get("dtype", "bfloat16")))
open("helper_mod.py", "w").write("X = 42\\n")
import helper_mod
print(helper_mod.X, __doc__, sys.modules[__name__].TinyNet is TinyNet)
"""

SHUTDOWN = """\
import atexit, threading, time
atexit.register(lambda: print("bye from atexit"))
class Held:
    def __del__(self): print("finalised at shutdown")
held = Held()
threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
print("main done")
raise SystemExit("stopping: non-finite loss")
"""


@pytest.mark.parametrize("explain", [False, True], ids=["plain", "explained"])
def test_a_snippet_runs_as_a_script_does_from_its_first_line_to_the_interpreters_end(
    sb: Sandbox, tmp_path: Path, explain: bool
) -> None:
    """The snippet is `__main__` (its classes pickle, `dataclasses` and `get_type_hints` find its
    names), `sys.argv` is its own, its folder is on the path; after its last line the interpreter's
    shutdown happens (a thread still running is waited for, `atexit`, finalisers, the message of
    `sys.exit`). Before, a fork of the zygote was `__main__`: `torch.save(model)` raised
    PicklingError, argparse read the zygote's arguments, and nothing after the last line ran."""
    for code in (SCRIPT_LIKE, SHUTDOWN):
        (tmp_path / "snippet.py").write_text(code)
        fresh = subprocess.run(
            [sys.executable, "snippet.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        r = sb.run(code, explain=explain)
        assert r.stdout == fresh.stdout, (r.status, r.message, r.stderr)
    assert (
        "torch.bfloat16\n['dtype'] <class 'torch.dtype'>\ntorch.bfloat16\n42 None True\n"
        == sb.run(SCRIPT_LIKE).stdout
    )
    assert r.stdout == "main done\nthread done\nbye from atexit\nfinalised at shutdown\n"
    assert r.stderr == fresh.stderr == "stopping: non-finite loss\n" and r.status == "error"


OWN_MODES = """\
import torch
from torch.utils._python_dispatch import TorchDispatchMode
class Logged(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        print(func, getattr(out, "dtype", None))
        return out
class Noisy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        print("tf:", getattr(func, "__name__", func))
        return super().__torch_function__(func, types, args, kwargs or {})
x = torch.randn(4, 4)
lin = torch.nn.Linear(4, 4)
with Logged():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = lin(x)
        z = y.float().softmax(-1)
with torch.autocast("cpu", dtype=torch.bfloat16):
    w = torch.mm(x.as_subclass(Noisy), x)
print(type(w).__name__, w.dtype)
"""


def test_an_explained_run_prints_what_the_snippets_own_modes_and_subclasses_print(
    sb: Sandbox, tmp_path: Path
) -> None:
    """The explainer's own tensor work (its overflow checks: `abs`, `aminmax`, `item` after every
    low-precision op; its reads of the inputs' dtypes) is hidden from the snippet's dispatch modes
    (a logging TorchDispatchMode, torch's DebugMode) and its tensor subclasses: learners are shown
    the explained run, which printed those ops among the snippet's own."""
    (tmp_path / "snippet.py").write_text(OWN_MODES)
    fresh = subprocess.run(
        [sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    r = sb.run(OWN_MODES, explain=True)
    assert r.status == "ok", r.message
    assert r.stdout == fresh.stdout
    assert (
        "aten.addmm.default torch.bfloat16" in r.stdout
        and "aminmax" not in r.stdout
        and r.stdout.count("tf:") == 2
    )
    assert r.explanation is not None and any(
        op["name"] == "torch.mm" for op in r.explanation["ops"]
    )


CHAINED = """\
import torch
def load(state):
    try:
        return state["scaler"]
    except KeyError as err:
        raise RuntimeError("checkpoint has no GradScaler state") from err
try:
    load({})
except RuntimeError as e:
    e.add_note("save scaler.state_dict() beside the model")
    raise
"""


@pytest.mark.parametrize("explain", [False, True], ids=["plain", "explained"])
def test_an_exception_is_shown_with_its_cause_and_notes_as_python_prints_it(
    sb: Sandbox, tmp_path: Path, explain: bool
) -> None:
    """`raise ... from err` is shown with the error it was raised from, and a note added to it
    under its message, in Python's words: shown alone, the last exception lost its cause."""
    (tmp_path / "snippet.py").write_text(CHAINED)
    fresh = subprocess.run(
        [sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    r = sb.run(CHAINED, explain=explain)
    assert r.status == "error" and r.exception.type == "RuntimeError" and r.exception.line == 6
    assert r.exception.traceback == fresh.stderr.replace(
        f'"{tmp_path / "snippet.py"}"', '"<snippet>"'
    )
    assert "KeyError: 'scaler'\n\nThe above exception was the direct cause" in r.exception.traceback


@pytest.mark.parametrize("explain", [False, True], ids=["plain", "explained"])
def test_a_warning_quoting_a_stack_quotes_the_snippets_frames_only(
    sb: Sandbox, explain: bool
) -> None:
    """Anomaly mode's warning quotes the forward call's stack: as in a fresh python it starts at
    the snippet's line. The runner's frames (runpy, the zygote, the exec) came first, and the
    warning's length cap then cut off the snippet's line, the one it was quoted for."""
    r = sb.run("import torch\nx = torch.zeros(3, requires_grad=True)\nwith torch.autograd.detect_anomaly():\n"
               "    y = x / x\n    y.sum().backward()\n", explain=explain)  # fmt: skip
    quoted = next(w.message for w in r.warnings if "Traceback of forward call" in w.message)
    assert quoted.split("caused the error:\n")[1].startswith(
        '  File "<snippet>", line 4, in <module>\n    y = x / x\n'
    ), quoted
    assert "runpy" not in quoted and "sandbox" not in quoted and quoted.count('File "') == 1


def test_torch_threads_are_the_runs_own_not_taken_from_the_snippets_share(sb: Sandbox) -> None:
    """`Limits.torch_threads` (a key's second proof run asks for 2): torch computes on them, and
    starting them takes nothing from the snippet's processes or memory. Started by the snippet's
    first large op, they counted against its share, and libgomp ended the process where none was
    left (`killed`), or a large allocation ran out of memory, on code that runs on one thread."""
    busy = ("import threading, torch\nev = threading.Event()\n"
            "ts = [threading.Thread(target=ev.wait, daemon=True) for _ in range(3)]\n"
            "for t in ts: t.start()\nprint(torch.full((10_000_000,), 0.1).sum().item(), torch.get_num_threads())\n")  # fmt: skip
    one, two = sb.run(busy, Limits(processes=4)), sb.run(busy, Limits(processes=4, torch_threads=2))
    assert (one.status, one.stdout) == ("ok", "999999.4375 1\n"), one.message
    assert (two.status, two.stdout) == ("ok", "999999.5625 2\n"), (two.message, two.stderr)
    big = "import torch\nprint(torch.full((10_000_000,), 0.1).sum().item() > 0)\nprint(torch.zeros(960 << 20, dtype=torch.uint8).numel())\n"
    r = sb.run(big, Limits(torch_threads=2))
    assert (r.status, r.stdout) == ("ok", f"True\n{960 << 20}\n"), r.message


def test_cuda_asked_on_cpu_host_is_unavailable_not_rewritten(sb: Sandbox) -> None:
    if sb.environment.get("device_kind") == "cuda":
        pytest.skip("this host has a CUDA GPU: the test is of a host without one")
    r = sb.run("import torch\nprint(torch.ones(1).cuda())", device="cuda")
    assert r.status == "unavailable" and "CUDA" in r.message
    r = sb.run("import torch\nprint(torch.ones(1).cuda())")
    assert r.status == "unavailable" and "CUDA" in r.message and r.stdout == ""


def test_result_round_trips_through_json(sb: Sandbox) -> None:
    r = sb.run("import warnings\nwarnings.warn('careful')\nprint('hi')\n1/0")
    again = RunResult.from_dict(json.loads(r.to_json()))
    assert again == r
    assert r.to_dict() == dataclasses.asdict(r)  # to_dict is hand-written: no field left behind


def test_random_numbers_behave_as_in_a_fresh_python(sb: Sandbox) -> None:
    """Runners are forks of one process, yet each draws what a fresh process would: its own
    numbers where torch seeds itself from the OS, the same where it starts from a fixed seed;
    and a seeded run draws exactly what a seeded fresh process draws."""
    draw = "import torch\nprint(torch.rand(3), torch.randn(2))\n"
    runs = {sb.run(draw).stdout for _ in range(3)}
    fresh = {
        subprocess.run(
            [sys.executable, "-c", draw], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    if len(fresh) == 1:
        assert runs == fresh
    else:
        assert len(runs) == 3, runs
    assert len({sb.run("import random\nprint(random.random())").stdout for _ in range(3)}) == 3
    assert len({sb.run("import numpy\nprint(numpy.random.rand())").stdout for _ in range(3)}) == 3
    # NumPy's generator is set as its own seeding sets it: its first word, position, no cached gaussian
    shape = "import numpy\ns = numpy.random.get_state()\nprint(s[0], hex(s[1][0]), s[2:])\n"
    fresh_shape = subprocess.run(
        [sys.executable, "-c", shape], capture_output=True, text=True, check=True
    ).stdout
    assert sb.run(shape).stdout == fresh_shape == "MT19937 0x80000000 (623, 0, 0.0)\n"
    seeded = (
        "import torch\ntorch.manual_seed(0)\nprint(torch.rand(3), torch.nn.Linear(2, 1).weight)\n"
    )
    again = subprocess.run(
        [sys.executable, "-c", seeded], capture_output=True, text=True, check=True
    )
    assert sb.run(seeded).stdout == again.stdout


def test_the_zygote_stays_single_threaded_after_its_warm_up(sb: Sandbox) -> None:
    """It runs torch ops once (on a CPU host) before it forks runners: a thread started there
    (an intra-op pool, say) would leave each fork with locks no thread of its own can release."""
    assert sb.zygote is not None
    assert os.listdir(f"/proc/{sb.zygote.pid}/task") == [str(sb.zygote.pid)]
    assert sb.run("import torch\nprint(torch.get_num_threads())").stdout == "1\n"


def test_sandbox_package_never_imports_app() -> None:
    paths = sorted((REPO / "sandbox").rglob("*.py"))
    assert REPO / "sandbox" / "explain" / "explainer.py" in paths  # subpackages are walked too
    for path in paths:
        for line in path.read_text().splitlines():
            assert not line.lstrip().startswith(("import app", "from app")), f"{path.name}: {line}"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, sandbox, sandbox.zygote, sandbox.execute; print(sorted(m for m in sys.modules if m == 'app' or m.startswith('app.')))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert out.stdout.strip() == "[]"


def test_zygote_and_runner_never_load_the_pool() -> None:
    """The package's exports are lazy: the zygote (and so every runner forked from it) carries no
    pool, no collector and none of their threads. `subprocess` is not asserted on: torch imports it
    itself (and so does `ctypes.util`, which `sandbox.isolation` uses to find libc)."""
    code = (
        "import sys, sandbox.zygote, sandbox.runner, sandbox.execute\n"
        "print(sorted(m for m in ('sandbox.pool', 'sandbox.collect', 'sandbox.slot') if m in sys.modules))\n"
        "import torch\n"
        "print('subprocess' in sys.modules)\n"
        "from sandbox import Sandbox, RunResult\n"
        "print(Sandbox.__module__, RunResult.__module__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.splitlines() == ["[]", "True", "sandbox.pool sandbox.result"]


def test_needs_cuda_is_one_answer_for_every_caller() -> None:
    env = {"torch_version": "2.9.0", "device_kind": "cpu", "not_a_field": 1}
    r = RunResult.needs_cuda(env, "This question's code")
    assert r.status == "unavailable"
    assert r.message == "This question's code needs a CUDA GPU; this server has none."
    assert r.environment == Environment(torch_version="2.9.0", device_kind="cpu")
    assert (
        RunResult.needs_cuda(r.environment).message
        == "This snippet needs a CUDA GPU; this server has none."
    )
    assert Environment.from_dict(env) == r.environment  # unknown keys are ignored, known ones kept


def test_modules_torch_imports_lazily_stay_importable(sb: Sandbox) -> None:
    """Hiding the server's tree (even a checkout under /tmp) must not hide the interpreter and torch."""
    r = sb.run(
        "import torch.utils.benchmark, torch._subclasses.schema_check_mode\nprint(torch.ones(2))"
    )
    assert r.status == "ok", r
    assert r.stdout == "tensor([1., 1.])\n"
