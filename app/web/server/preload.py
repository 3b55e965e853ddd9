"""`python -m app.web.server.preload`: the parent of `ampquiz serve --processes N`'s web processes.

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

The processes accept connections from one shared socket. A socket of their own each
(SO_REUSEPORT) was tried: a burst of connections then lands evenly, where on one socket the
process that wakes first takes all of them; but the kernel gives each socket its share of new
connections whatever its process is doing, so a process that is stuck, or killed and being
replaced, left a share of learners waiting or reset, where on one socket the others take them.
A browser's idle connection is closed after 5 s, and a busy one after 100 requests
(`app.web.server.connections`, serve's `http` option), so a class's connections spread over the
processes again.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import json
import logging
import multiprocessing
import os
import sys

UVICORN_ENV = "_AMPQUIZ_UVICORN"
NOT_LISTENING = 4
"""This process's exit status when it could not listen on the address given (a port in use)."""
BANNER_ENV = "_AMPQUIZ_BANNER"
"""serve's "serving on" line: said here, once the port is held."""
GO = b"go\n"
"""What `serve` writes to this process's standard input once the database is open: only then
are the web processes forked (see `main`)."""
STARTUP_FAILED = 3
"""A web process's exit status when it could not build its app (`app.web.server.process`), and then
this process's: uvicorn's own for a process that failed before serving
(`uvicorn.config.STARTUP_FAILURE`), on which it stops the other processes and ends. Any other
status is taken for a crash, and the process started again: a database refusing a second web
process's connections ("too many connections") had each started again twice a second, a
traceback each time, for as long as serve ran, its port open and unanswered."""

log = logging.getLogger("ampquiz.web")


def _fork_workers() -> bool:
    """Has uvicorn fork its web processes from this one instead of spawning new interpreters.
    uvicorn takes the multiprocessing context its workers start from in one place,
    `uvicorn._subprocess.spawn`; where that is gone (another uvicorn), it spawns as before."""
    import uvicorn._subprocess

    if not hasattr(uvicorn._subprocess, "spawn"):
        log.warning(
            "this uvicorn starts its web processes its own way: each imports the app and reads the bank itself"
        )
        return False
    # Typed as the spawn context it is by default; the fork context has the same interface.
    uvicorn._subprocess.spawn = multiprocessing.get_context("fork")  # type: ignore[assignment]
    return True


def main() -> int:
    # First of all: its start-up rules (cores, no collector, gone with serve) hold here too.
    importlib.import_module("app.web.server.process")

    from app.settings import Settings
    from app.verify.live_bank import preload

    options = json.loads(os.environ.pop(UVICORN_ENV, "{}"))
    logging.basicConfig(
        level=options.get("log_level", "info").upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    if _fork_workers():
        preload(Settings.from_env().bank)
        # What every process inherits lives as long as they do: out of the collector's way, so that
        # a collection in one of them does not walk it (and write to its pages, unsharing them).
        gc.freeze()
    # The web processes open the database as they start: `serve` opens it first, while this
    # process imports the app and reads the bank, and says when it could. A database it cannot
    # open (a server that never answers, say) is then said once, by serve, in a line: forked
    # before that, each web process waited out the same connect timeout and printed a traceback.
    try:
        told = sys.stdin.buffer.readline()
    except KeyboardInterrupt:  # Ctrl+C reaches the terminal's whole group, this process too
        told = b""
    if told != GO:
        # Not told to start: serve is stopping (and then says why, whatever this returns), or
        # this process was stopped alone (Ctrl+C sent to it only), which serve must not take
        # for a clean stop.
        return 1
    return _run_web_processes(options, os.environ.pop(BANNER_ENV, ""))


def _run_web_processes(options: dict, banner: str) -> int:
    """What `uvicorn.run` does for several processes, keeping its supervisor to read how they
    ended: 0, or `STARTUP_FAILED` when one could not start (uvicorn then stops them
    all, and ends as if asked to: serve would have said nothing, and ended with status 0)."""
    from uvicorn import Config
    from uvicorn.supervisors import Multiprocess

    config = Config("app.web.server.process:create_app", factory=True, **options)
    try:
        socket = config.bind_socket()
    except SystemExit:  # uvicorn said why (a port in use, say)
        return NOT_LISTENING
    # Uvicorn before it built each process's server itself.
    if "target" in inspect.signature(Multiprocess).parameters:
        from uvicorn import Server

        supervisor = Multiprocess(config, target=Server(config).run, sockets=[socket])  # type: ignore[call-arg]
    else:
        supervisor = Multiprocess(config, sockets=[socket])
    if banner:
        print(banner, file=sys.stderr, flush=True)
    try:
        supervisor.run()
    except KeyboardInterrupt:
        pass
    return STARTUP_FAILED if any(p.exitcode == STARTUP_FAILED for p in supervisor.processes) else 0


if __name__ == "__main__":
    sys.exit(main())
