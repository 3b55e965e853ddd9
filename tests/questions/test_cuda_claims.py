"""Every op-dtype claim the bank makes about CUDA autocast agrees with the op lists torch ships.

CUDA cannot run here, so the bank's statements such as "`softmax` and `sum` are in CUDA's
`fp32_set_opt_dtype` group" or "`mean` is on no list" are checked against the header the wheel
ships, `torch/include/ATen/autocast_mode.h` (see tests/support/autocast_header.py). `CLAIMS` lists
them per question; a scan of every sentence that mentions CUDA (or of every `requires: cuda`
question) finds the ops named in backticks, so a new claim cannot slip in without an entry here.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.bank.load import load_bank
from tests.support.autocast_header import cuda_lists, cuda_policy
from tests.support.cli import BANK

LOWER, FP32, SET_OPT, APPEND, PROMOTE = (
    "lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype", "promote"
)  # fmt: skip
UNLISTED = "unlisted"
BANNED = "banned"
"""`binary_cross_entropy` raises under CUDA autocast; the ban is registered in autocast_mode.cpp
(not shipped), so the header check is that the op is on none of its lists."""

# How a name written in the bank maps to the aten ops autocast registers.
ATEN = {
    "F.linear": ["linear"], "nn.Linear": ["linear"], "Linear": ["linear"],
    "BCELoss": ["binary_cross_entropy"],
    "cross_entropy": ["log_softmax", "nll_loss"],  # decomposes into these two
    "normalize": ["norm"],
    "grid_sample": ["grid_sampler"],
    "LayerNorm": ["layer_norm"], "GroupNorm": ["group_norm"], "RMSNorm": ["rms_norm"],
    "BatchNorm1d": ["batch_norm"], "Embedding": ["embedding"],
}  # fmt: skip

# question id -> {op as the bank writes it: the CUDA policy the bank states or implies}
CLAIMS: dict[str, dict[str, str | tuple[str, ...]]] = {
    "loss-type-is-tensor-class": {"mse_loss": FP32},
    "layers-residual-stream-dtype": {"LayerNorm": FP32},
    "layers-fp16-layernorm-accumulates": {"layer_norm": FP32},
    "backends-mps-vs-cuda-lists": {"rms_norm": FP32, "batch_norm": UNLISTED},
    "fp16-log1p": {"log": FP32, "log1p": FP32, "expm1": FP32},
    "lv-bf16-loss-quantised": {"cross_entropy": (SET_OPT, FP32)},
    "seed004-mm-autocast-cpu": {"mm": LOWER},
    "cuda-autocast-cpu-input-error": {"addmm": LOWER, "Linear": LOWER, "linear": LOWER},
    "cpu-autocast-when-not-to-use-amp": {"layer_norm": FP32, "softmax": SET_OPT},
    "cpu-autocast-float16-sum-overflow": {"sum": SET_OPT},
    "cpu-autocast-softmax-reductions-stay-bf16": {
        "exp": FP32,
        "softmax": SET_OPT,
        "sum": SET_OPT,
        "mean": UNLISTED,
    },
    "debugging-nans-fp16-exp-overflow": {"exp": FP32, "softmax": SET_OPT, "log_softmax": SET_OPT},
    "seed004-fp16-sum-overflow-cpu": {"sum": SET_OPT},
    "fp16-sum-overflow-fix": {
        "sum": SET_OPT,
        "softmax": SET_OPT,
        "cumsum": SET_OPT,
        "prod": SET_OPT,
    },
    "inference-no-grad-autocast-cuda": {"softmax": SET_OPT, "Linear": LOWER},
    "layers-embedding-norm-linear-chain": {
        "embedding": UNLISTED,
        "layer_norm": FP32,
        "linear": LOWER,
    },
    "layers-sdpa-under-autocast": {"scaled_dot_product_attention": LOWER, "softmax": SET_OPT},
    "layers-why-layer-norm-fp32": {
        "linear": LOWER,
        "layer_norm": FP32,
        "group_norm": FP32,
        "rms_norm": FP32,
        "exp": FP32,
        "log": FP32,
        "pow": FP32,
        "softmax": SET_OPT,
        "sum": SET_OPT,
    },
    "layers-norms-under-cuda-autocast": {
        "Linear": LOWER,
        "layer_norm": FP32,
        "rms_norm": FP32,
        "group_norm": FP32,
        "batch_norm": UNLISTED,
    },
    "layers-flash-attention-needs-low-precision": {
        "scaled_dot_product_attention": LOWER,
        "_scaled_dot_product_flash_attention": LOWER,
    },
    "seed001-linear-fp16-mseloss-fp32": {"linear": LOWER, "mse_loss": FP32},
    "cuda-reductions-exp-float32": {
        "mm": LOWER,
        "exp": FP32,
        "log": FP32,
        "pow": FP32,
        "sum": SET_OPT,
        "softmax": SET_OPT,
        "log_softmax": SET_OPT,
        "cumsum": SET_OPT,
        "prod": SET_OPT,
        "mean": UNLISTED,
    },
    "cpu-autocast-which-ops-float32": {"softmax": SET_OPT, "layer_norm": FP32},
    "binary-cross-entropy-cpu-vs-cuda": {
        "binary_cross_entropy": BANNED,
        "BCELoss": BANNED,
        "binary_cross_entropy_with_logits": FP32,
    },
    "cuda-autocast-loss-dtypes": {
        "linear": LOWER,
        "cross_entropy": (SET_OPT, FP32),
        "log_softmax": SET_OPT,
        "nll_loss": FP32,
        "mul": UNLISTED,
        "mean": UNLISTED,
        "pow": FP32,
    },
    "cuda-autocast-normalize-dtypes": {
        "linear": LOWER,
        "mul": UNLISTED,
        "sum": SET_OPT,
        "norm": APPEND,
        "normalize": APPEND,
    },
    "cuda-autocast-explicit-dtype-wins": {
        "sum": SET_OPT,
        "softmax": SET_OPT,
        "cumsum": SET_OPT,
        "exp": FP32,
        "layer_norm": FP32,
    },
    "distributed-fsdp-mixed-precision-policy": {"softmax": SET_OPT},
    "compile-autocast-inside-compiled-function": {"linear": LOWER},
}

# Ops named in a CUDA sentence that make no CUDA dtype claim there (say, a CPU statement in
# the same sentence), per question.
NOT_CLAIMS: dict[str, set[str]] = {}


def _policy_of(written: str) -> tuple[str, ...]:
    return tuple(cuda_policy(op) for op in ATEN.get(written, [written]))


def _expected(policy: str | tuple[str, ...], written: str) -> tuple[str, ...]:
    if isinstance(policy, tuple):
        return policy
    return (policy,) * len(ATEN.get(written, [written]))


def _text(q: Any) -> str:
    parts = [q.prompt, q.explanation]
    for choice in getattr(q, "choices", None) or []:
        parts += [choice.text, choice.why]
    return "\n".join(parts)


def _questions() -> dict[str, Any]:
    bank = load_bank(BANK)
    assert not bank.problems, bank.problems
    return {lq.id: lq.question for s in bank.sets for lq in s.questions}


def _known_ops() -> set[str]:
    return set().union(*cuda_lists().values()) | set(ATEN) | {
        "mean", "embedding", "batch_norm", "binary_cross_entropy", "mul", "add", "cat", "relu",
    }  # fmt: skip


def test_every_cuda_claim_agrees_with_the_header() -> None:
    questions = _questions()
    wrong, missing = [], []
    claims = 0
    for qid, ops in CLAIMS.items():
        assert qid in questions, f"CLAIMS names {qid}, which is not in the bank"
        text = _text(questions[qid]) + "\n" + (questions[qid].code or "")
        for written, policy in ops.items():
            claims += 1
            if written not in text:
                missing.append(f"{qid}: `{written}` is not mentioned any more")
            actual = _policy_of(written)
            if policy == BANNED:
                if actual != (UNLISTED,) * len(actual):
                    wrong.append(
                        f"{qid}: `{written}` said to be banned, but the header lists it: {actual}"
                    )
            elif actual != _expected(policy, written):
                wrong.append(f"{qid}: `{written}` said to be {policy}, the header says {actual}")
    print(f"bank vs ATen/autocast_mode.h: {claims} CUDA op-dtype claims in {len(CLAIMS)} questions")
    assert not wrong and not missing, "\n".join(wrong + missing)
    assert claims >= 70


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n\s*[-*] ")


def _named_ops(sentence: str) -> set[str]:
    found = set()
    for name in re.findall(r"`([^`]+)`", sentence):
        base = re.sub(r"\(.*$", "", name).strip()
        base = (
            base.removeprefix("torch.nn.functional.").removeprefix("torch.nn.").removeprefix("F.")
        )
        base = base.removeprefix("torch.").removeprefix("Tensor.").removeprefix("nn.")
        base = base.split(".")[-1]
        if base in _known_ops():
            found.add(base)
    return found


def test_no_cuda_claim_is_left_unchecked() -> None:
    """Every op named in a sentence about CUDA has an entry in CLAIMS (or NOT_CLAIMS)."""
    unchecked = []
    scanned = 0
    for qid, q in _questions().items():
        for sentence in _SENTENCE.split(_text(q)):
            if "CUDA" not in sentence and q.requires != "cuda":
                continue
            scanned += 1
            for op in sorted(_named_ops(sentence)):
                if op not in CLAIMS.get(qid, {}) and op not in NOT_CLAIMS.get(qid, set()):
                    unchecked.append(f"{qid}: `{op}` in {sentence.strip()[:100]!r}")
    print(f"scanned {scanned} sentences about CUDA")
    assert not unchecked, "add these to CLAIMS (or NOT_CLAIMS) in this file:\n" + "\n".join(
        unchecked
    )


@pytest.mark.parametrize(
    ("op", "policy"),
    [
        ("vdot", PROMOTE),
        ("grid_sampler", PROMOTE),
        ("cat", UNLISTED),
        ("rms_norm", FP32),
        ("norm", APPEND),
    ],
)
def test_header_parse_reads_the_lists_the_bank_relies_on(op: str, policy: str) -> None:
    assert cuda_policy(op) == policy
