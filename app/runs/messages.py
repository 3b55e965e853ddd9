"""The two messages that cross a process or a machine: a run request and its result.

Both are JSON. A result comes from another process (a pool host, or a worker on another machine
that runs untrusted code all day), so it is a claim: `result_from_claim` checks its shape, types
and sizes before the web believes any of it, and says plainly what was wrong.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from app.runs import DEVICES
from app.runs.turns import PRIORITY
from sandbox import Limits, RunResult
from sandbox.result import STATUSES

MAX_RESULT_BYTES = 900_000
"""Under NATS's default 1 MB payload: a result larger than this is refused by the worker itself."""
MAX_RUN_BYTES = 1 << 20
"""The largest run request a stream keeps (NATS's default payload bound)."""


MAX_LIMITS = Limits(
    wall_s=300.0, cpu_s=300, memory_bytes=8 << 30, output_bytes=1 << 20, file_bytes=64 << 20,
    processes=64, open_files=256, cpu_cores=2.0, disk_bytes_per_s=256 << 20, disk_ios_per_s=10_000,
    torch_threads=2,
)  # fmt: skip
"""The most a run request may ask for (the wall limit as `AMPQUIZ_RUN_WALL_S` allows at most):
whoever can publish to the queue gets no more than this,
and a limit outside (0, maximum] is refused, not clamped."""
LEAST_LIMITS = {"disk_bytes_per_s": 16 << 20, "disk_ios_per_s": 200}
"""The disk caps' floor: reads queued behind a run's cap hold their pages locked, so a cap of 1
byte a second would have frozen every page a run touched, for the host too, for its whole wall
time."""


class BadMessage(ValueError):
    """A request or result that is not what this protocol says; the message says what."""


@dataclass(frozen=True)
class RunRequest:
    id: str
    code: str
    limits: Limits
    explain: bool = False
    device: str | None = None
    lane: str = "question"
    """Its turn's lane (`app.runs.turns.PRIORITY`), for a backend that keeps turns (the pool host)."""
    owners: tuple[str, ...] = ()
    """Whose share of the room it takes ("learner:<id>", "address:<ip>"), likewise."""

    def encode(self) -> bytes:
        return json.dumps(
            {"id": self.id, "code": self.code, "limits": self.limits.to_dict(),
             "explain": self.explain, "device": self.device, "lane": self.lane, "owners": list(self.owners)}
        ).encode()  # fmt: skip

    @classmethod
    def decode(cls, raw: bytes, *, max_code_bytes: int = 1_000_000) -> RunRequest:
        data = _object(raw, "run request")
        code, run_id, device = data.get("code"), data.get("id"), data.get("device")
        if not isinstance(run_id, str) or not run_id or len(run_id) > 100:
            raise BadMessage("run request: 'id' must be a short string")
        if not isinstance(code, str) or len(code.encode()) > max_code_bytes:
            raise BadMessage("run request: 'code' must be a string within the size limit")
        if device is not None and device not in DEVICES:
            raise BadMessage(f"run request: 'device' must be one of {DEVICES} or null")
        limits = data.get("limits") or {}
        if not isinstance(limits, dict):
            raise BadMessage("run request: 'limits' must be an object")
        lane, owners = data.get("lane", "question"), data.get("owners", [])
        if lane not in PRIORITY:
            raise BadMessage(f"run request: 'lane' must be one of {tuple(PRIORITY)}")
        if (
            not isinstance(owners, list)
            or len(owners) > 4
            or not all(isinstance(o, str) and 0 < len(o) <= 200 for o in owners)
        ):
            raise BadMessage("run request: 'owners' must be a short list of short strings")
        return cls(
            run_id, code, _limits(limits), bool(data.get("explain")), device, lane, tuple(owners)
        )


def _limits(asked: dict[str, Any]) -> Limits:
    unknown = sorted(set(asked) - set(Limits.__dataclass_fields__))
    if unknown:
        raise BadMessage(f"run request: unknown limits {unknown}")
    chosen = {}
    for name, value in asked.items():
        most, least = getattr(MAX_LIMITS, name), LEAST_LIMITS.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= most:
            raise BadMessage(f"run request: limit {name!r} must be a number in (0, {most}]")
        if least is not None and value < least:
            raise BadMessage(f"run request: limit {name!r} must be a number in [{least}, {most}]")
        chosen[name] = type(most)(value)
    return Limits(**chosen)


def encode_result(result: RunResult) -> bytes:
    raw = json.dumps(result.to_dict()).encode()
    if len(raw) > MAX_RESULT_BYTES:  # the explanation is what grows: keep the run, say why
        result.explanation = None
        result.message = (
            result.message + " " if result.message else ""
        ) + "(Its explanation was too large to send.)"
        raw = json.dumps(result.to_dict()).encode()
    return raw


def result_from_claim(raw: bytes | dict[str, Any]) -> RunResult:
    """A `RunResult` from what another process said, checked field by field."""
    data = _object(raw, "run result") if isinstance(raw, bytes) else raw
    if data.get("status") not in STATUSES:
        raise BadMessage(f"run result: unknown status {data.get('status')!r}")
    for name in ("stdout", "stderr", "message"):
        if not isinstance(data.get(name, ""), str):
            raise BadMessage(f"run result: {name!r} must be a string")
    duration = data.get("duration_ms", 0.0)
    if not isinstance(duration, int | float) or not math.isfinite(duration) or duration < 0:
        raise BadMessage("run result: 'duration_ms' must be a non-negative number")
    exc, warnings, env = (
        data.get("exception"),
        data.get("warnings", []),
        data.get("environment", {}),
    )
    if exc is not None and not (
        isinstance(exc, dict)
        and all(isinstance(exc.get(k), str) for k in ("type", "message", "traceback"))
    ):
        raise BadMessage("run result: 'exception' must have type, message and traceback")
    if not isinstance(warnings, list) or not all(
        isinstance(w, dict) and isinstance(w.get("message"), str) for w in warnings
    ):
        raise BadMessage("run result: 'warnings' must be a list of warnings")
    if not isinstance(env, dict) or not all(
        isinstance(v, str | list | type(None)) for v in env.values()
    ):
        raise BadMessage("run result: 'environment' must be an object of strings")
    if data.get("explanation") is not None and not isinstance(data["explanation"], dict):
        raise BadMessage("run result: 'explanation' must be an object")
    try:
        return RunResult.from_dict(data)
    except (TypeError, KeyError) as exc:
        raise BadMessage(f"run result: {exc}") from None


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadMessage(f"{what}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadMessage(f"{what}: not a JSON object")
    return data
