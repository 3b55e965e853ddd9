"""What a question's code is about, as far as the mutations are concerned: the one owner of what a
"GradScaler question" is.

Issue 17 promises that every GradScaler question of the bank gets at least three mutants whose
output differs visibly from the original's. A **GradScaler question** is one whose code *uses a
GradScaler in a training step*: it builds one (any spelling: `torch.amp.GradScaler`, the
deprecated `torch.cuda.amp.GradScaler`, a bare imported `GradScaler`) and calls at least one of
the methods of a step on it: `scale`, `unscale_`, `step` or `update`. Those are what the
GradScaler mistakes (drop `scale()`, clip before `unscale_()`, `optimizer.step()` instead of
`scaler.step()`, …) break, so such code always has mistakes to show.

Code that only builds a scaler and reads it back (`is_enabled()`, `get_scale()`,
`state_dict()`) is *not* one, even though it names GradScaler: it asks about the API itself (which
device the default is, what the old spelling returns). There is no step for a mistake to break,
and where that scaler is a CUDA one on a host without CUDA it is a pass-through that no scaler
mistake can change. Its mutants (the other device, the old spelling, `enabled=False`) are still
recorded and shown as cards; they are just not held to three visible effects.
"""

from __future__ import annotations

import ast

from app.mutate.rule import Scalers, is_grad_scaler

STEP_METHODS = ("scale", "unscale_", "step", "update")
"""The GradScaler methods of a training step."""


def is_gradscaler_question(code: str) -> bool:
    """Whether this code uses a GradScaler in a training step (see the module's note); False for
    code that does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    nodes = list(ast.walk(tree))
    if not any(is_grad_scaler(n) for n in nodes):
        return False
    scalers = Scalers(tree)
    return any(scalers.method_call(n, method) for n in nodes for method in STEP_METHODS)
