"""Our explanation agrees with torch's own account of the same run.

Every bank snippet that runs on the CPU, and a probe per op, runs twice in the session's pool:
once with `explain=True` (our op trace: `report["ops"]`, each call's output dtype and the casts
autocast inserted under it), and once wrapped in torch's `DebugMode` (`torch.utils._debug_mode`,
see `torch_reference.py`), which records the same calls and the aten `_to_copy` casts under them.
Per snippet line and call, the output dtypes and the casts must be the same, call for call.

The probes also check the *reasons* our trace gives: each op runs under CPU autocast with float32
inputs, with bfloat16 inputs and with mixed inputs, and what torch does in those three cases says
which CPU list the op is on (lower precision, float32, promote, or none). Our reason must name the
same list. The CUDA lists cannot run here; their promote list is checked against the header torch
ships (`ATen/autocast_mode.h`), and the bank's CUDA claims in tests/questions/test_cuda_claims.py.

Each test prints what it compared (`pytest -rA` shows it).
"""

from __future__ import annotations

import textwrap
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from app.bank.load import load_bank
from sandbox import Limits, Sandbox
from sandbox.explain.reasons import AUTOCAST_PROMOTE
from tests.sandbox.explain.torch_reference import (
    compare,
    ops_of_explanation,
    ops_of_reference,
    reference_snippet,
    truncate_casts,
)
from tests.support.autocast_header import cuda_lists
from tests.support.cli import BANK
from tests.support.explain import explain_in

# --- running both accounts -----------------------------------------------------------------------

AMPLE = Limits(wall_s=120.0, cpu_s=120)
"""What is compared is what the runs did, not how fast: the default 10 s wall limit ended runs
on a loaded host (the slowest, DebugMode over `loss-scale-steady-state-skips`, takes 2.7 s of a
quiet one's time, under a one-core cap), and the test failed on a timeout, not on a disagreement."""


def _both(pool: Sandbox, codes: dict[str, str]) -> dict[str, tuple[Any, ...]]:
    """{name: (our report, DebugMode's counts, our counts, problems)} per snippet, two runs at a
    time. The problems say when the two runs did not even run the same snippet to the same end:
    a different exception (or one on one side only), or a tracer that reported trouble of its own."""

    def one(item: tuple[str, str]) -> tuple[str, tuple[Any, ...]]:
        name, code = item
        _, report = explain_in(pool, code, AMPLE)
        ref = pool.run(reference_snippet(textwrap.dedent(code)), AMPLE)
        assert ref.status in ("ok", "error"), (name, ref.status, ref.stderr[-2000:])
        theirs, data = ops_of_reference(ref.stdout)
        ours_raised = ((report.get("error") or {}).get("type") or "").rsplit(".", 1)[-1] or None
        problems = []
        if ours_raised != data["error"]:
            problems.append(
                f"the runs ended differently: explained run raised {ours_raised}, DebugMode run raised {data['error']}"
            )
        if report.get("explainer_errors"):
            problems.append(f"the tracer reported errors: {report['explainer_errors']}")
        return name, (report, theirs, ops_of_explanation(report), problems)

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(ex.map(one, codes.items()))


def _bank_snippets() -> dict[str, str]:
    bank = load_bank(BANK)
    assert not bank.problems, bank.problems
    return {
        q.id: q.question.code
        for s in bank.sets
        for q in s.questions
        if q.question.code and q.question.requires != "cuda"
    }


def _totals(results: dict[str, tuple[Any, ...]]) -> tuple[int, int, int]:
    calls = sum(sum(r[2].values()) for r in results.values())
    cast_calls = sum(n for r in results.values() for key, n in r[2].items() if key[3])
    casts = sum(n * len(key[3]) for r in results.values() for key, n in r[2].items() if key[3])
    return calls, cast_calls, casts


def test_every_cpu_snippet_in_the_bank_agrees_with_debugmode(sandbox_pool: Sandbox) -> None:
    snippets = _bank_snippets()
    results = _both(sandbox_pool, snippets)
    problems = {
        qid: diff
        for qid, (_, theirs, ours, ended) in results.items()
        if (diff := ended + compare(ours, truncate_casts(theirs)))
    }
    calls, cast_calls, casts = _totals(results)
    summary = (
        f"bank vs DebugMode: {len(snippets)} snippets, {calls} calls compared "
        f"({cast_calls} under autocast with {casts} casts)"
    )
    print(summary)
    assert not problems, (
        summary + "\n" + "\n".join(f"{qid}:\n  " + "\n  ".join(d) for qid, d in problems.items())
    )
    assert len(snippets) >= 100 and calls >= 1000 and casts >= 100, summary


# --- op probes -------------------------------------------------------------------------------------

PROBE = """
import torch
import torch.nn.functional as F
torch.manual_seed(0)
def f32(*shape):
    return torch.rand(*shape)
def b16(*shape):
    return torch.rand(*shape).bfloat16()
idx = torch.tensor([0, 2])
with torch.autocast("cpu", dtype=torch.bfloat16):
    out_a = {a}  # float32 inputs
    out_b = {b}  # bfloat16 inputs
    out_c = {c}  # mixed: the first bfloat16, the rest float32
"""

# One call per op, and no other call on its line; T(...) is a floating-point input, made float32
# or bfloat16 per line (inside helper functions, so their own calls are on other lines).
OPS: dict[str, str] = {
    "linear": "F.linear(T(2, 4), T(3, 4), T(3))",
    "matmul": "torch.matmul(T(2, 3), T(3, 2))",
    "mm": "torch.mm(T(2, 3), T(3, 2))",
    "bmm": "torch.bmm(T(2, 2, 3), T(2, 3, 2))",
    "addmm": "torch.addmm(T(2), T(2, 3), T(3, 2))",
    "baddbmm": "torch.baddbmm(T(2, 2, 2), T(2, 2, 3), T(2, 3, 2))",
    "conv1d": "F.conv1d(T(1, 2, 5), T(3, 2, 3))",
    "conv2d": "F.conv2d(T(1, 2, 5, 5), T(3, 2, 3, 3), T(3))",
    "conv_transpose2d": "F.conv_transpose2d(T(1, 2, 4, 4), T(2, 3, 3, 3))",
    "prelu": "F.prelu(T(2, 3), T(1))",
    "scaled_dot_product_attention": "F.scaled_dot_product_attention(T(1, 2, 4, 8), T(1, 2, 4, 8), T(1, 2, 4, 8))",
    "einsum": "torch.einsum('ij,jk->ik', T(2, 3), T(3, 2))",
    "softmax": "torch.softmax(T(2, 3), dim=1)",
    "log_softmax": "F.log_softmax(T(2, 3), dim=1)",
    "sum": "T(2, 3).sum()",
    "mean": "T(2, 3).mean()",
    "exp": "torch.exp(T(3))",
    "log": "torch.log(T(3))",
    "pow": "torch.pow(T(3), 2)",
    "cumsum": "torch.cumsum(T(3), 0)",
    "prod": "torch.prod(T(3))",
    "relu": "torch.relu(T(3))",
    "add": "torch.add(T(3), T(3))",
    "cat": "torch.cat([T(2), T(2)])",
    "stack": "torch.stack([T(2), T(2)])",
    "index_copy": "T(3, 2).index_copy(0, idx, T(2, 2))",
    "addcmul": "torch.addcmul(T(3), T(3), T(3))",
    "addcdiv": "torch.addcdiv(T(3), T(3), T(3))",
    "atan2": "torch.atan2(T(3), T(3))",
    "cross": "torch.cross(T(2, 3), T(2, 3), dim=1)",
    "dot": "torch.dot(T(3), T(3))",
    "vdot": "torch.vdot(T(3), T(3))",
    "tensordot": "torch.tensordot(T(2, 3), T(3, 2), dims=1)",
    "bilinear": "F.bilinear(T(2, 3), T(2, 4), T(5, 3, 4))",
    "scatter_add": "T(3).scatter_add(0, idx, T(2))",
    "index_put": "T(3).index_put((idx,), T(2))",
    "grid_sample": "F.grid_sample(T(1, 1, 4, 4), T(1, 2, 2, 2), align_corners=False)",
    "interpolate": "F.interpolate(T(1, 1, 4), scale_factor=2.0, mode='linear')",
    "layer_norm": "F.layer_norm(T(2, 4), (4,), T(4), T(4))",
    "group_norm": "F.group_norm(T(2, 4, 3), 2, T(4), T(4))",
    "batch_norm": "F.batch_norm(T(4, 3), T(3), T(3), T(3), T(3))",
    "embedding": "F.embedding(idx, T(3, 4))",
    "mse_loss": "F.mse_loss(T(2, 3), T(2, 3))",
    "l1_loss": "F.l1_loss(T(2, 3), T(2, 3))",
    "smooth_l1_loss": "F.smooth_l1_loss(T(2, 3), T(2, 3))",
    "huber_loss": "F.huber_loss(T(2, 3), T(2, 3))",
    "kl_div": "F.kl_div(T(2, 3), T(2, 3), reduction='batchmean')",
    "nll_loss": "F.nll_loss(T(2, 3), idx)",
    "cross_entropy": "F.cross_entropy(T(2, 3), idx)",
    "binary_cross_entropy": "F.binary_cross_entropy(T(2, 3), T(2, 3))",
    "binary_cross_entropy_with_logits": "F.binary_cross_entropy_with_logits(T(2, 3), T(2, 3))",
    "cosine_similarity": "F.cosine_similarity(T(2, 3), T(2, 3))",
    "cdist": "torch.cdist(T(2, 3), T(4, 3))",
    "pad_reflect": "F.pad(T(1, 2, 4), (1, 1), mode='reflect')",
    "max_pool3d": "F.max_pool3d(T(1, 1, 2, 2, 2), 2)",
    "fft": "torch.fft.rfft(T(8))",
    "inverse": "torch.linalg.inv(T(3, 3))",
    "trace": "torch.trace(T(3, 3))",
}


def _probe(template: str) -> str:
    def fill(first: str, rest: str) -> str:
        parts = template.split("T(")
        return parts[0] + "".join(
            (first if i == 0 else rest) + "(" + p for i, p in enumerate(parts[1:])
        )

    c = fill("b16", "f32") if template.count("T(") > 1 else "None"
    return PROBE.format(a=fill("f32", "f32"), b=fill("b16", "b16"), c=c)


LOW, FP32 = "bfloat16", "float32"


def _category(lines: dict[str, list[tuple[str | None, tuple[Any, ...]]]]) -> str:
    """Which CPU autocast list torch's behaviour puts the op on, from DebugMode's three lines."""
    (a_out, a_casts), (b_out, b_casts) = lines["a"][0], lines["b"][0]
    if a_out == LOW and any(c[1] == LOW for c in a_casts):
        return "lower_precision_fp"
    if any(c[1] == FP32 for c in b_casts):  # even from bfloat16 inputs (the output may be complex)
        return "fp32"
    if lines.get("c"):
        c_out, c_casts = lines["c"][0]
        if b_out == LOW and not b_casts and c_out == FP32 and any(c[1] == FP32 for c in c_casts):
            return "promote"
    return "unlisted"


def _expected_reason(out: str | None, casts: tuple[Any, ...], category: str) -> str | None:
    """The start of the reason our trace must give for what torch did (None: must not credit
    autocast with a cast)."""
    if any(c[1] == LOW for c in casts) and out == LOW:
        return "cast to bfloat16 by autocast"
    if any(c[1] == FP32 for c in casts) and out == FP32:
        if category == "promote":
            return "promoted to the widest input (float32) by autocast"
        return "run in float32 by autocast (it is on autocast's float32 list)"
    return None


@pytest.fixture(scope="module")
def probe_codes() -> dict[str, str]:
    return {name: _probe(template) for name, template in OPS.items()}


def test_op_probes_agree_with_debugmode_and_name_the_list_torch_uses(
    sandbox_pool: Sandbox, probe_codes: dict[str, str]
) -> None:
    results = _both(sandbox_pool, probe_codes)
    problems: list[str] = []
    categories: dict[str, str] = {}
    for name, (report, theirs, ours, ended) in results.items():
        problems += [f"{name}: {d}" for d in ended + compare(ours, truncate_casts(theirs))]
        code = textwrap.dedent(probe_codes[name]).splitlines()
        line_of = {
            k: code.index(next(s for s in code if s.strip().startswith(f"out_{k} ="))) + 1
            for k in "abc"
        }
        by_line: dict[str, list[tuple[str | None, tuple[Any, ...]]]] = {}
        for k, line in line_of.items():
            by_line[k] = [(key[2], key[3] or ()) for key in theirs if key[0] == line]
        if any(len(by_line[k]) != 1 for k in "ab") or len(by_line["c"]) > 1:
            problems.append(f"{name}: want one call per probe line, DebugMode saw {by_line}")
            continue
        categories[name] = cat = _category(by_line)
        for k, line in line_of.items():
            for op in (o for o in report["ops"] if o["line"] == line):
                casts = tuple((c["from"], c["to"]) for c in op["casts"])
                want = _expected_reason(
                    op["output"]["dtype"] if op.get("output") else None, casts, cat
                )
                reason = op["reason"]
                if want is not None and not reason.startswith(want):
                    problems.append(f"{name} ({k}, {cat}): reason {reason!r}, torch says {want!r}")
                if want is None and "by autocast" in reason:
                    problems.append(f"{name} ({k}, {cat}): reason {reason!r} credits autocast")
    calls, _, casts = _totals(results)
    listed = Counter(categories.values())
    summary = (
        f"op probes vs DebugMode: {len(OPS)} ops ({len(results)} snippets, {calls} calls, "
        f"{casts} casts); CPU lists seen: {dict(sorted(listed.items()))}"
    )
    print(summary)
    print("  " + ", ".join(f"{n}: {c}" for n, c in sorted(categories.items())))
    assert not problems, summary + "\n" + "\n".join(problems)
    # what torch showed, as a fixed point: a change in torch's CPU lists shows up here
    assert categories["grid_sample"] == "fp32" and categories["vdot"] == "unlisted"
    assert {n for n, c in categories.items() if c == "promote"} == {"cat", "stack", "index_copy"}
    # the tracer's CPU promote list is exactly what CPU autocast promotes
    assert AUTOCAST_PROMOTE["cpu"] == {n for n, c in categories.items() if c == "promote"}


# --- the CUDA promote list, against the header -------------------------------------------------

# user-level names the tracer sees for the header's aten names
_CALLED_AS = {
    "grid_sampler": {"grid_sampler", "grid_sample"},
    "index_put": {"index_put", "index_put_"},
}


def test_tracer_cuda_promote_list_is_the_headers() -> None:
    header = cuda_lists()["promote"]
    expected = set().union(*(_CALLED_AS.get(op, {op}) for op in header))
    print(
        f"CUDA promote list: {len(header)} header ops, {len(AUTOCAST_PROMOTE['cuda'])} tracer names"
    )
    assert AUTOCAST_PROMOTE["cuda"] == expected
    assert "vdot" in header and "grid_sampler" in header
