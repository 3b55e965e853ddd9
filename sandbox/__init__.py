"""Run untrusted PyTorch snippets in fresh, isolated processes from a warm pool.

Depends on torch and the standard library only, so it runs on a bare GPU host.

    from sandbox import Sandbox, Limits
    with Sandbox(workers=2) as sb:
        result = sb.run(code, limits=Limits(wall_s=10))

Runs in: the server (its exports). The zygote and every runner import this package too, so the
exports are loaded lazily, on first use: `python -m sandbox.zygote` never loads the pool (nor
`subprocess`, `threading` and `logging` with it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.limits import Limits
    from sandbox.pool import Sandbox
    from sandbox.result import Environment, ExceptionInfo, RunResult, WarningInfo
    from sandbox.zygote_link import SandboxError

__all__ = [
    "Environment",
    "ExceptionInfo",
    "Limits",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "WarningInfo",
]

_EXPORTS = {
    "Limits": "sandbox.limits",
    "Sandbox": "sandbox.pool",
    "SandboxError": "sandbox.zygote_link",
    "Environment": "sandbox.result",
    "ExceptionInfo": "sandbox.result",
    "RunResult": "sandbox.result",
    "WarningInfo": "sandbox.result",
}


def __getattr__(name: str) -> Any:
    """PEP 562: import an export's module the first time the export is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
