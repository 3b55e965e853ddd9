"""What `python snippet.py` gives a script around its code, given to a snippet run in a fork of the
zygote: a `__main__` module of its own, `sys.argv` naming it, its folder first on `sys.path`, and
the interpreter's shutdown after it (other threads joined, `atexit` callbacks, `__main__`'s names
cleared). A run's output is then what the learner's own `python` prints.

Each was a difference a review found between a run and a fresh `python`: `sys.modules["__main__"]`
was the zygote's module, so pickling any class the snippet defined failed (`torch.save(model)`
raised PicklingError where Python saves it), and so did `multiprocessing` with a snippet's
function, `typing.get_type_hints` and `dataclasses` under `from __future__ import annotations`;
`sys.argv` was the zygote's (`argparse` refused it); `__doc__` was the builtins module's; and the
runner ended with `os._exit` right after the code, so a thread still printing, an `atexit`
callback or a finaliser at shutdown printed nothing, nor did `sys.exit("message")` its message.

Runs in: the runner, around `sandbox.execute`'s exec.
"""

from __future__ import annotations

import atexit
import builtins
import importlib.machinery
import os
import sys
import threading
import types
from typing import Any

from sandbox.frames import SNIPPET


def main_module() -> dict[str, Any]:
    """A new `__main__` module for the snippet, made `sys.modules["__main__"]`; returns its
    namespace, which the snippet is executed in. Callbacks registered at exit before now (the
    zygote's imports') are dropped: the runner never runs them (it ends with `os._exit`), and a
    fresh `python` running the snippet would not have them."""
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace.update(
        __file__=SNIPPET, __builtins__=builtins, __annotations__={}, __cached__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", SNIPPET),
    )  # fmt: skip
    sys.modules["__main__"] = module
    sys.argv[:] = [SNIPPET]
    sys.path.insert(
        0, os.getcwd()
    )  # the script's folder comes first: modules the snippet writes there import
    atexit._clear()
    return namespace


def shut_down(namespace: dict[str, Any], error: BaseException | None) -> None:
    """What the interpreter does after a script's last line, in its order: `sys.exit("message")`
    writes its message, other threads still running are waited for, `atexit` callbacks run
    (their errors written as Python writes them), then `__main__`'s names are cleared as Python
    clears a module at shutdown (those with one leading underscore first), so finalisers run."""
    if isinstance(error, SystemExit) and error.code is not None and not isinstance(error.code, int):
        try:
            print(error.code, file=sys.stderr)
        except Exception:  # noqa: BLE001, S110 - the snippet may have closed or replaced stderr
            pass
    threading._shutdown()  # type: ignore[attr-defined]  # private: typeshed leaves it out
    atexit._run_exitfuncs()
    private = [n for n in namespace if n.startswith("_") and not n.startswith("__")]
    for name in [*private, *(n for n in list(namespace) if n != "__builtins__")]:
        namespace[name] = None
