"""Run untrusted PyTorch snippets in fresh, isolated processes from a warm pool.

Depends on torch and the standard library only, so it runs on a bare GPU host.

    from sandbox import Sandbox, Limits
    with Sandbox(workers=2) as sb:
        result = sb.run(code, limits=Limits(wall_s=10))
"""

from sandbox.limits import Limits
from sandbox.pool import Sandbox, SandboxError
from sandbox.result import Environment, ExceptionInfo, RunResult, WarningInfo

__all__ = ["Environment", "ExceptionInfo", "Limits", "RunResult", "Sandbox", "SandboxError", "WarningInfo"]
