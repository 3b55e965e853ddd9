"""What one run produced, as plain data that serialises to JSON (the web, the CLI and verify read it).

Runs in: the server (the pool builds a `RunResult` from what a runner reported); the runner
takes only the `NEEDS_CUDA` wording from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "memory", "output_limit", "killed", "unavailable"]

STATUSES: tuple[str, ...] = (
    "ok",
    "error",
    "timeout",
    "memory",
    "output_limit",
    "killed",
    "unavailable",
)

TRANSIENT: frozenset[str] = frozenset({"timeout", "memory", "killed"})
"""How a run may end for a reason of the moment (a busy host, a neighbour's memory): the same
code run again may not end this way, so such a result is neither kept nor taken as proof."""

NEEDS_CUDA = "{subject} needs a CUDA GPU; this server has none."
"""The one wording of an `unavailable` run: CUDA asked for where there is none (never faked)."""


@dataclass
class ExceptionInfo:
    type: str
    """Qualified name as a learner would write it: `AssertionError`, `torch.OutOfMemoryError`."""
    message: str
    traceback: str
    """Only the snippet's own frames, so the learner is not shown sandbox internals."""
    line: int | None = None
    """Line of the snippet where the exception surfaced (1-based), when it came from the snippet."""
    source_line: str | None = None


@dataclass
class WarningInfo:
    category: str
    message: str
    line: int | None = None


@dataclass
class Environment:
    torch_version: str = ""
    device_kind: str = "cpu"
    """`cpu` or `cuda`: where `requires: any` code ends up running."""
    device_name: str = ""
    cuda_version: str | None = None
    python_version: str = ""
    protections: list[str] = field(default_factory=list)
    """Isolation features active for this run (for example `net-namespace`, `cgroup-memory`)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Environment:
        """From what a runner, the zygote or a stored record said: known keys kept, others ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class RunResult:
    status: Status
    stdout: str = ""
    stderr: str = ""
    exception: ExceptionInfo | None = None
    warnings: list[WarningInfo] = field(default_factory=list)
    duration_ms: float = 0.0
    environment: Environment = field(default_factory=Environment)
    message: str = ""
    """Why the run ended the way it did, in a sentence, for every status but `ok`."""
    explanation: dict[str, Any] | None = None
    """Filled when the run was asked to explain itself (see sandbox.explain)."""

    @classmethod
    def needs_cuda(
        cls, environment: Mapping[str, Any] | Environment, subject: str = "This snippet"
    ) -> RunResult:
        """The answer to CUDA code where there is no GPU: `unavailable`, said plainly, not run."""
        env = (
            environment
            if isinstance(environment, Environment)
            else Environment.from_dict(environment)
        )
        return cls(
            status="unavailable", message=NEEDS_CUDA.format(subject=subject), environment=env
        )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data. The explanation is already plain data and is shared, not copied:
        `asdict` would deep-copy it, which costs the web more CPU per run than the rest of a reply."""
        return {
            "status": self.status,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exception": asdict(self.exception) if self.exception else None,
            "warnings": [asdict(w) for w in self.warnings],
            "duration_ms": self.duration_ms,
            "environment": asdict(self.environment),
            "message": self.message,
            "explanation": self.explanation,
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        exc = data.get("exception")
        return cls(
            status=data["status"],
            stdout=data.get("stdout", ""),
            stderr=data.get("stderr", ""),
            exception=ExceptionInfo(**exc) if exc else None,
            warnings=[WarningInfo(**w) for w in data.get("warnings", [])],
            duration_ms=data.get("duration_ms", 0.0),
            environment=Environment.from_dict(data.get("environment", {})),
            message=data.get("message", ""),
            explanation=data.get("explanation"),
        )
