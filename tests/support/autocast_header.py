"""CUDA autocast's op lists, read from the header torch ships: `torch/include/ATen/autocast_mode.h`.

The header's `AT_FORALL_*` macros are the lists CUDA autocast registers (and other GPU backends
reuse): lower precision (float16 by default), float32, float32 unless a dtype is given
(`fp32_set_opt_dtype`), float32 appended as an extra dtype argument (`norm`), and promote to the
widest input. The CPU's lists live only in `autocast_mode.cpp`, which the wheel does not ship.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import torch

HEADER = Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"

_MACROS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
    "AT_FORALL_PROMOTE": "promote",
}


@cache
def cuda_lists() -> dict[str, frozenset[str]]:
    """{policy: aten op names}, e.g. `lists()["promote"]` contains "vdot" and "grid_sampler"."""
    text = HEADER.read_text()
    lists: dict[str, frozenset[str]] = {}
    for macro, policy in _MACROS.items():
        m = re.search(rf"#define {macro}\(_\)(.*?)(?:\n\s*\n|\n#)", text, re.DOTALL)
        assert m, f"{macro} not found in {HEADER}"
        lists[policy] = frozenset(re.findall(r"_\((\w+)", m.group(1)))
    m = re.search(
        r"#define AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE\(_\)(.*?)\n\s*\n", text, re.DOTALL
    )
    assert m, f"AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE not found in {HEADER}"
    lists["fp32_append_dtype"] = frozenset(re.findall(r"ADD_NS\((\w+)\)", m.group(1)))
    return lists


def cuda_policy(op: str) -> str:
    """The header list an aten op is on, or "unlisted"."""
    for policy, ops in cuda_lists().items():
        if op in ops:
            return policy
    return "unlisted"
