"""The rules: each classic AMP mistake as one small class, listed in `RULES`.

Every rule changes every place its pattern appears (a mistake made once is usually made
throughout); a rule that calls `self.place(node)` at each place before changing it also gets
one-place variants (`drop-scale@1`, `drop-scale@last`: see `app.mutate.rule`); every rule also
gets `drop-scale@last-call` (`app.mutate.one_call`); `with_variants` lists them all. Adding a rule
is one class (in `scaler_mistakes` or `autocast_mistakes`) with `name`, `title`, `explanation` and
`edit`, and one entry in `RULES`; a rule's `name` keys its recorded runs, so renaming one drops its records.
"""

from __future__ import annotations

from app.mutate.autocast_mistakes import (
    BackwardInsideAutocast,
    DropAutocast,
    DropFloatCasts,
    SwapAutocastDevice,
    SwapAutocastDtype,
)
from app.mutate.one_call import InLastCall
from app.mutate.rule import Rule
from app.mutate.scaler_mistakes import (
    ClipBeforeUnscale,
    DeprecatedCudaScaler,
    DropEnabledFlag,
    DropScale,
    DropUnscale,
    DropUpdate,
    OptimizerStep,
    ScalerDisabled,
    SwapScalerDevice,
    UpdateInInnerLoop,
)

RULES: tuple[Rule, ...] = (
    DropScale(),
    DropUpdate(),
    UpdateInInnerLoop(),
    ClipBeforeUnscale(),
    DropUnscale(),
    OptimizerStep(),
    ScalerDisabled(),
    SwapScalerDevice(),
    DeprecatedCudaScaler(),
    DropEnabledFlag(),
    DropAutocast(),
    SwapAutocastDtype(),
    SwapAutocastDevice(),
    BackwardInsideAutocast(),
    DropFloatCasts(),
)
"""Every rule, in the order their mutants are listed."""


def with_variants(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """Each rule followed by its variants: in one place only (`@1`, `@last`), then in one run of a
    helper called twice only (`@last-call`). A variant given here stays as it is."""
    return tuple(
        v for r in rules for v in ((r, *r.variants(), InLastCall(r)) if r.base is None else (r,))
    )


def rule(name: str) -> Rule | None:
    """A rule, or a one-place variant (`drop-scale@1`), by name."""
    return next((r for r in with_variants(RULES) if r.name == name), None)
