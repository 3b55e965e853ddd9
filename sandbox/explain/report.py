"""The explanation report's declared shape: what `Explainer.report()` returns, key by key.

Runs in: the runner builds these (as plain dicts; this module only declares them); the server
reads them in `RunResult.explanation`. `app` imports this module under `TYPE_CHECKING` only, so it
imports nothing but `typing`.

The report has been through JSON-safe copying before it leaves the runner: tuples are lists, and a
non-finite float (a loss scale of inf, say) is the string "inf" or "nan", as JSON has no literal
for them; `Number` says where that can happen.
"""

from typing import Literal, NotRequired, TypedDict

Number = float | str
"""A float, or "inf" / "-inf" / "nan" for a non-finite one."""


class TensorMeta(TypedDict):
    """One tensor (or Python float) an op took or returned."""

    dtype: str
    """`float16`, `float32`, ... as typed after `torch.`; `python float` for a Python scalar."""
    shape: list[int]
    device: str | None
    """`cpu`, `cuda:0`, ...; None for a Python scalar."""


class AutocastState(TypedDict):
    device_type: str
    dtype: str


CastRecord = TypedDict("CastRecord", {"from": str, "to": str, "shape": list[int]})
"""A cast autocast (or an explicit conversion) made of one input: dtype from, dtype to, its shape."""


ReusedCast = TypedDict("ReusedCast", {"dtype": str, "shape": list[int], "line": int | None})
"""A cast autocast's weight cache handed a call instead of casting again: its dtype, its shape,
and the snippet line of the call that made it."""

RegionKind = Literal[
    "custom_fwd", "custom_fwd_cast", "custom_bwd", "recompute", "backward", "compiled"
]


class Region(TypedDict):
    """What a call ran inside, besides the autocast state: a `custom_fwd` forward (with
    `cast_inputs`, autocast off), `custom_fwd`'s own casts of the inputs, a `custom_bwd` backward,
    checkpoint's recomputation during backward, other snippet code the backward pass ran (a hook,
    an autograd Function's backward), or a `torch.compile` graph (not traced call by call)."""

    kind: RegionKind
    text: str
    """In words, as the row's reason begins."""


class OpRecord(TypedDict):
    """One user-level torch call, folded by (line, op, signature): `count` is how often it ran."""

    name: str
    """User-level name: `torch.nn.functional.linear`, `Tensor.sum`, `torch.mm`."""
    line: int | None
    count: int
    inputs: list[TensorMeta]
    """At most the first six; `inputs_total` says how many there were when more."""
    output: TensorMeta | None
    autocast: AutocastState | None
    """Autocast on the inputs' device while the call ran; None outside autocast."""
    casts: list[CastRecord]
    """At most four; `casts_total` says how many there were when more."""
    reason: str
    """Why the output has its dtype, in words."""
    inputs_total: NotRequired[int]
    casts_total: NotRequired[int]
    error: NotRequired[str]
    """`Type: first line of the message` when the call raised."""
    reused: NotRequired[list[ReusedCast]]
    """Autocast's cached casts the call was handed (at most four), when any."""
    region: NotRequired[Region]


ScalerEventKind = Literal["scale", "unscale_", "inf_check", "step", "update", "misuse", "error"]


class ScalerEvent(TypedDict, total=False):
    """One GradScaler event, folded with a count. `event`, `line` and `count` are always there; the
    other keys depend on the kind of event, as noted on each."""

    event: ScalerEventKind
    line: int | None
    count: int
    enabled: bool
    """`scale` and `step` of a disabled scaler only: always False (and no other key)."""
    scale: Number | None
    """`scale`: the loss scale the loss was multiplied by."""
    explicit: bool
    """`unscale_`: called by the snippet (True) or inside `step()` (False)."""
    found_inf: bool
    """`inf_check`, and `step` when `in_optimizer`: the gradients held inf/NaN."""
    taken: bool
    """`step`: `optimizer.step()` was called (False: GradScaler skipped it, inf/NaN gradients)."""
    in_optimizer: bool
    """`step`, always True when present: the optimizer unscales by itself
    (`_step_supports_amp_scaling`, as `fused=True` ones do), so GradScaler called its `step()`
    with `found_inf` set instead of skipping it; on inf/NaN the optimizer skipped its update."""
    unchanged: bool
    """`step` with `in_optimizer` and `found_inf`: the parameters and the optimizer state were
    compared with copies taken before the step: True when none moved (new state all zeros)."""
    state_created: int
    """With `unchanged`: parameters whose optimizer state that step created."""
    unscaled_loss: bool
    """`step`, always True when present: the gradients it used came from `backward()` on a loss
    `scale()` never multiplied (the step's `misuse` event says so)."""
    old_scale: Number | None
    """`update`: the scale before."""
    new_scale: Number | None
    """`update`: the scale after."""
    change: Literal["unchanged", "halved", "doubled", "lowered", "raised"]
    """`update`."""
    call: str
    """`error`: the GradScaler method that raised (`step`, `unscale_`, ...)."""
    error: str
    """`error`: `Type: message` of what it raised."""
    message: str
    """`misuse` and `error`: the explanation, in a sentence."""


HazardKind = Literal["overflow", "underflow", "absorption", "stale_cast", "cast_dtype"]
"""Float16/bfloat16 numerics, and autocast's weight cache: a cached cast reused after its weight
changed in place (`stale_cast`), or handed to a region of another dtype (`cast_dtype`)."""


class Hazard(TypedDict):
    """A numeric hazard of float16/bfloat16, folded by (kind, line, op)."""

    kind: HazardKind
    line: int | None
    op: str
    """The user-level call it happened in, or `aten.<op>` when none was traced."""
    aten: str
    dtype: str
    count: int
    message: str


class SnippetException(TypedDict):
    """What the snippet raised, tied to a snippet line and, when known, to what caused it."""

    type: str
    message: str
    """The first line of the exception's message, at most 300 characters."""
    line: int | None
    explanation: str | None
    source: str | None
    """What raised it: a traced op's name, `scaler.step()`, or `GradScaler`."""


class Report(TypedDict):
    """The whole explanation of one run (`RunResult.explanation`)."""

    summary: list[str]
    """One to four plain sentences, most important first."""
    ops: list[OpRecord]
    scaler: list[ScalerEvent]
    hazards: list[Hazard]
    # Every key below is always there, except in the report of a run whose explanation itself
    # failed: that one has only the four above, with the failure as its summary.
    ops_truncated: NotRequired[bool]
    ops_total: NotRequired[int]
    """Distinct (line, op, signature) rows seen, shown or not."""
    calls_total: NotRequired[int]
    """Traced calls, repeats included."""
    scaler_truncated: NotRequired[bool]
    hazards_truncated: NotRequired[bool]
    error: NotRequired[SnippetException | None]
    explainer_errors: NotRequired[list[str]]
    """Present only when the tracer hit trouble of its own (at most three messages)."""
