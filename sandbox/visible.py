"""What a run may see of the host's disk, decided in the server before any runner exists: the
folders its root holds besides system folders (`allowed_paths`), and the paths hidden from it
even there (`hidden_paths`). `sandbox.filesystem` builds the runner's root from both.

Runs in: the server (the pool's process).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
"""The folder holding the `sandbox` package (the zygote starts there)."""
_NEVER_HIDE = {
    "/",
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc",
    "/proc",
    "/dev",
    "/sys",
    "/tmp",
    "/var",
}


def default_hidden_paths() -> list[str]:
    """What a snippet must not read: the server's working tree (config, database), home folders."""
    return [os.getcwd(), os.path.expanduser("~"), "/root", "/home"]


def allowed_paths() -> list[str]:
    """What a runner's root holds besides system folders: the interpreter, the folders packages
    are imported from (torch, NumPy and their dependencies) and this package's own folder."""
    keep = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    keep |= {p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)}
    keep.add(os.path.join(PACKAGE_ROOT, "sandbox"))
    for name in ("torch", "numpy"):  # found without importing them: the server stays light
        spec = importlib.util.find_spec(name)
        keep |= set(spec.submodule_search_locations or []) if spec else set()
    return sorted(str(Path(p).resolve()) for p in keep if Path(p).is_dir())


def hidden_paths(extra: list[str]) -> list[str]:
    """The default hidden paths and `extra`, resolved; never a system folder the root needs."""
    resolved = {str(Path(p).resolve()) for p in [*default_hidden_paths(), *extra]}
    return sorted(resolved - _NEVER_HIDE)
