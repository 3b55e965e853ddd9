"""GradScaler's error messages, explained: which call went wrong, and what to do instead.

Runs in: the runner (part of the explanation). Only the standard library is imported.
"""

from __future__ import annotations

# (substring of the error message, explanation; "{call}" and "{line}" are filled in)
_SCALER_ERRORS: tuple[tuple[str, str], ...] = (
    (
        "but _scale is None",
        "scaler.{call}() ran but scaler.scale(loss) was never called, so the scaler has no scale",
    ),
    (
        "but _growth_tracker is None",
        "scaler.{call}() ran but scaler.scale(loss) was never called, so the scaler has no scale",
    ),
    (
        "No inf checks were recorded for this optimizer",
        (
            "scaler.step() found no gradients to check: "
            "no parameter of this optimizer has a .grad, so backward() did not run on the scaled loss "
            "(scaler.scale(loss).backward()) before step(), or the gradients were cleared in between"
        ),
    ),
    (
        "No inf checks were recorded prior to update",
        (
            "scaler.update() ran but no scaler.step(optimizer) "
            "happened since the last update(), so there was nothing to adjust the scale from"
        ),
    ),
    (
        "unscale_() has already been called on this optimizer",
        (
            "scaler.unscale_(optimizer) was called "
            "twice in one iteration; call it at most once between update() calls"
        ),
    ),
    (
        "unscale_() is being called after step()",
        (
            "scaler.unscale_(optimizer) came after "
            "scaler.step(optimizer); unscale before stepping (for example to clip gradients), not after"
        ),
    ),
    (
        "step() has already been called since the last update()",
        (
            "scaler.step(optimizer) ran twice "
            "without scaler.update() in between; call update() once per iteration, after the steps"
        ),
    ),
    (
        "Attempting to unscale FP16 gradients",
        (
            "the parameters themselves are float16 (for example "
            "after model.half()), so their gradients are float16 and GradScaler refuses to unscale them; "
            "keep parameters in float32 and let autocast do the casting"
        ),
    ),
    ("Closure use is not currently supported", "scaler.step() does not accept a closure"),
)


def explain_scaler_error(exc: BaseException, call: str | None = None) -> str | None:
    """A learner's explanation of a GradScaler error message, or None if it is not one."""
    text = str(exc)
    for needle, explanation in _SCALER_ERRORS:
        if needle in text:
            if call is None:
                call = "step"
                if text.startswith("Attempted "):
                    call = text.split()[1]
            return explanation.format(call=call)
    return None
