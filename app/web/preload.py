"""`python -m app.web.preload`: the parent of `ampquiz serve --processes N`'s web processes.

It imports the web app and reads the bank once, then has uvicorn fork the web processes from it,
and keeps them alive as uvicorn does (a process that dies is replaced by a new fork). uvicorn
alone spawns each one as a new interpreter that imports the whole web stack and reads every
question file again: about 1.3 s of CPU per process at 5,000 questions on a 2-core host, the
largest part of start-up beside the sandbox's torch import. Forked, a process starts with both
done, shares those pages with its siblings until one writes them, and only builds its app.

`serve` starts this process before anything of its own runs in a thread, passing uvicorn's
options in `_AMPQUIZ_UVICORN` (JSON), and the rest through `AMPQUIZ_*` as for any web process.
Nothing here starts a thread before the forks: a fork copies only the thread that calls it, and a
lock another thread held would stay held in the child for good.

Each web process listens on a socket of its own (SO_REUSEPORT), so the kernel spreads new
connections evenly over them. On one shared socket, the process that woke first took every
connection waiting (its loop accepts them in one go): a class whose browsers connected at once was
served by one process while the others idled (10 learners: 885 requests/s on two processes, 975 on
one).
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import multiprocessing
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

UVICORN_ENV = "_AMPQUIZ_UVICORN"

log = logging.getLogger("ampquiz.web")


class _ForkOnOwnSocket:
    """The multiprocessing context uvicorn starts its web processes from: each is forked from this
    one, and listens on a socket of its own beside the port this one holds."""

    _fork = multiprocessing.get_context("fork")

    def Process(self, target: Callable[..., None], kwargs: dict[str, Any]) -> multiprocessing.Process:  # a context's name
        return self._fork.Process(target=_start_on_own_socket, args=(target,), kwargs=kwargs)


def _fork_workers() -> bool:
    """Has uvicorn fork its web processes from this one instead of spawning new interpreters.
    uvicorn takes the multiprocessing context its workers start from in one place,
    `uvicorn._subprocess.spawn`; where that is gone (another uvicorn), it spawns as before."""
    import uvicorn._subprocess

    if not hasattr(uvicorn._subprocess, "spawn"):
        log.warning("this uvicorn starts its web processes its own way: each imports the app and reads the bank itself")
        return False
    uvicorn._subprocess.spawn = _ForkOnOwnSocket()  # type: ignore[attr-defined]
    return True


def _reserve_port(host: str, port: int) -> socket.socket:
    """The port the web processes share, held here: bound with SO_REUSEPORT and never listening,
    so it takes no connection itself, and each web process binds a listening socket beside it.
    Sockets that set SO_REUSEPORT under one user share a port without a word: a port already held
    (a second `serve` on it) is refused first, by a plain bind."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a past server's TIME_WAIT does not count
        probe.bind((host, port))
        port = probe.getsockname()[1]  # port 0: the one the system chose
    held = socket.socket(family)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    held.bind((host, port))
    return held


def _start_on_own_socket(start: Callable[..., None], *, sockets: list[socket.socket], **kwargs: Any) -> None:
    """In a web process just forked: uvicorn's start of it on a listening socket of its own,
    bound beside each socket the parent holds; this process's copy of the parent's is closed."""
    from uvicorn.config import STARTUP_FAILURE

    own = []
    try:
        for held in sockets:
            sock = socket.socket(held.family)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(held.getsockname())
            own.append(sock)
            held.close()
    except OSError as exc:  # the same in every process: uvicorn stops rather than replace it
        log.error("a web process could not listen on %s: %s", held.getsockname(), exc)
        sys.exit(STARTUP_FAILURE)
    start(sockets=own, **kwargs)


def main() -> int:
    # First of all: its start-up rules (cores, no collector, gone with serve) hold here too.
    importlib.import_module("app.web.process")
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    from app.live_bank import preload
    from app.settings import Settings

    options = json.loads(os.environ.pop(UVICORN_ENV, "{}"))
    logging.basicConfig(level=options.get("log_level", "info").upper(), format="%(levelname)s %(name)s: %(message)s")
    if not _fork_workers():
        uvicorn.run("app.web.process:create_app", factory=True, **options)
        return 0
    config = uvicorn.Config("app.web.process:create_app", factory=True, **options)
    try:
        held = _reserve_port(config.host, config.port)
    except OSError as exc:
        log.error("cannot listen on %s:%s: %s", config.host, config.port, exc)
        return STARTUP_FAILURE
    preload(Settings.from_env().bank)
    # What every process inherits lives as long as they do: out of the collector's way, so that
    # a collection in one of them does not walk it (and write to its pages, unsharing them).
    gc.freeze()
    try:
        Multiprocess(config, sockets=[held]).run()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
