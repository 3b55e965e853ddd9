"""What `ampquiz serve --processes N`'s web processes run: `create_app`, started so that the
sandbox pool's own start is not slowed down by it. `app.web.server.preload` imports this module once and
forks the web processes from there, so these rules hold for it and for each of them.

- No cyclic garbage collection until the app is built. A web process starts by importing the
  whole web stack and taking in the bank: hundreds of thousands of long-lived objects and no
  garbage worth a collection, yet the collector would walk them again and again as they pile up
  (about a tenth of its start-up CPU). The bank's load then freezes everything alive out of the
  collector's way (`LiveBank.reload`).
- On the cores `serve` names in `_AMPQUIZ_STARTUP_CPUS` (all but one) until the app is built,
  then on every core again. The pool's start (the zygote's torch import, one thread, the
  longest part of start-up) then has a core to itself instead of a third of one beside the web
  processes, while they start on the others.
- Gone with `serve` (`_AMPQUIZ_SERVE_PID`): the kernel sends it SIGTERM when the process that
  started it dies, however that dies, and each web process forked from it SIGKILL when it dies.
  uvicorn's processes outlive a `serve` killed with SIGKILL (the OOM killer, `kill -9`): they kept
  the port, so the next `serve` could not start, and kept answering /healthz as if all were well,
  beside a sandbox pool that had died with `serve`.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import signal
import sys
from typing import NoReturn

gc.disable()

SERVE_PID_ENV = "_AMPQUIZ_SERVE_PID"
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int, sig: int = signal.SIGTERM) -> None:
    """`sig` to this process when `parent` dies (Linux; a fork does not inherit it)."""
    if not hasattr(os, "sched_getaffinity"):  # not Linux
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above: nothing will tell us
        os.kill(os.getpid(), sig)


_serve = os.environ.get(SERVE_PID_ENV, "")
if _serve.isdigit():  # started by `serve`
    _die_with(int(_serve))
_IMPORTED_IN = os.getpid()

STARTUP_CPUS_ENV = "_AMPQUIZ_STARTUP_CPUS"
_allowed: set[int] = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
_start_on = {
    int(c) for c in os.environ.get(STARTUP_CPUS_ENV, "").split(",") if c.isdigit()
} & _allowed
if _start_on and _start_on != _allowed:
    os.sched_setaffinity(0, _start_on)

from fastapi import FastAPI
from sqlalchemy.exc import SQLAlchemyError

from app.settings import Settings
from app.store.database import SchemaOutOfDate, unopenable
from app.web.factory import create_app as _create_app
from app.web.server.preload import STARTUP_FAILED


def create_app() -> FastAPI:
    # A web process forked by `app.web.server.preload`.
    if os.getpid() != _IMPORTED_IN and _serve.isdigit():
        # SIGKILL: with its parent gone nothing supervises it, and a process still starting (its
        # database not answering, say) only notes a SIGTERM, to act on once started: it stayed.
        _die_with(_IMPORTED_IN, signal.SIGKILL)
    try:
        return _create_app()
    except Exception as exc:  # noqa: BLE001 - whatever it is, the process cannot serve: said, then ended
        _could_not_start(exc)
    finally:
        gc.enable()
        if _start_on and _start_on != _allowed:
            with contextlib.suppress(OSError):  # the cores allowed changed meanwhile: keep these
                os.sched_setaffinity(0, _allowed)


def _could_not_start(exc: Exception) -> NoReturn:
    """Says why in a line where the database is why (a traceback otherwise), and ends the process
    so that serve stops (`STARTUP_FAILED`)."""
    # An older schema: which command upgrades it.
    if isinstance(exc, (SQLAlchemyError, SchemaOutOfDate)):
        print(f"ampquiz: a web process could not start: {unopenable(Settings.from_env().database_url, exc)}",
              file=sys.stderr, flush=True)  # fmt: skip
    else:
        logging.getLogger("ampquiz.web").exception("a web process could not start")
    sys.exit(STARTUP_FAILED)
