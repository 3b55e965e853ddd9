"""`ampquiz serve [--host H] [--port P] [--processes N]`: the web app under uvicorn, configured by
`AMPQUIZ_*`.

With several processes (the default: one per core) the processes share one port, and one sandbox
pool: this process starts it (`app.runs.pool_host`) while `app.web.server.preload` starts them, and hands
them its socket as `AMPQUIZ_WORKERS_URL`. With `AMPQUIZ_WORKERS_URL=nats://…` no sandbox starts
here at all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys


def default_processes() -> int:
    """One web process per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _cmd_serve(args: argparse.Namespace) -> int:
    from app.settings import Settings, SettingsError

    try:
        settings, bank_note = Settings.from_env(host=args.host, port=args.port).with_bank_found()
    except SettingsError as exc:
        print(f"ampquiz serve: {exc}", file=sys.stderr)
        return 2
    # A key anyone could know signs any learner's cookie: refused before anything starts.
    if problem := settings.secret_key_problem():
        print(f"ampquiz serve: {problem}", file=sys.stderr)
        return 2
    if problem := _broker_problem(settings):
        print(f"ampquiz serve: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()), format="%(levelname)s %(name)s: %(message)s"
    )
    if bank_note:
        print(f"ampquiz: {bank_note}", file=sys.stderr)
        os.environ[Settings.env_name("bank")] = str(
            settings.bank
        )  # the web processes read it there
    processes = args.processes or default_processes()
    common = {
        "host": settings.host, "port": settings.port, "log_level": args.log_level,
        "access_log": not args.no_access_log, "timeout_graceful_shutdown": 5,
        # Each connection with a deadline to send its request, a bound per address and one on its
        # requests (see app.web.server.connections: named, not imported, as nothing here imports the app).
        "http": "app.web.server.connections:BoundedConnection",
        # Whose X-Forwarded-For names the client: only the proxies the settings name (uvicorn
        # trusted 127.0.0.1's by default, so a local proxy passing the header on let any client
        # pick the address its shares count against).
        "proxy_headers": bool(settings.trusted_proxies), "forwarded_allow_ips": settings.trusted_proxies or None,
    }  # fmt: skip
    where = f"{processes} processes" if processes > 1 else "1 process"
    banner = (
        f"ampquiz: serving on http://{settings.host}:{settings.port}/ with {where} (Ctrl+C stops)"
    )
    try:
        if processes > 1:
            return _serve_processes(settings, processes, common, banner)
        import uvicorn

        from app.web.factory import create_app

        settings.resolved_secret_key()  # first, as with several processes (a settings error: 2)
        if problem := _database_problem(settings.database_url):
            print(f"ampquiz serve: {problem}", file=sys.stderr)
            return 1
        config = uvicorn.Config(create_app(settings), **common)
        server = uvicorn.Server(config)
        try:
            socket = config.bind_socket()
        except SystemExit:  # uvicorn said why (a port in use, say)
            return _cannot_listen(settings.host, settings.port)
        print(banner, file=sys.stderr)  # once the port is held
        # SIGTERM (a supervisor's stop) ends this process as Ctrl+C does, with status 0 as with
        # several processes: uvicorn stops gracefully on it, then raises it again once its own
        # handler is gone, which without this one killed the process (status 143 in a shell).
        signal.signal(signal.SIGTERM, _stop)
        try:
            server.run(sockets=[socket])
        except KeyboardInterrupt:  # as uvicorn.run: Ctrl+C is a stop
            pass
        return 0 if server.started else 1  # the app's start-up failed (said above)
    except SettingsError as exc:  # found on the way (the secret key's folder, say)
        print(f"ampquiz serve: {exc}", file=sys.stderr)
        return 2


def _broker_problem(settings: object) -> str | None:
    """Why the workers' NATS server must not be used as given (no credentials, unasked), or None;
    with AMPQUIZ_BROKER_INSECURE, a warning said here (and by each web process's log)."""
    from app.settings import Settings

    assert isinstance(settings, Settings)
    if not settings.workers_url.startswith(("nats://", "tls://")):
        return None
    from app.runs.jetstream import INSECURE, Broker

    broker = Broker.of(settings)
    if (refused := broker.refusal()) is None and not broker.authenticated:
        print(f"ampquiz serve: WARNING: {broker.where()} is used with no credentials ({INSECURE}): "
              "for local development only", file=sys.stderr)  # fmt: skip
    return refused


def _database_problem(url: str) -> str | None:
    """Opens the database (making or migrating its schema where the store may: `app.store.migrate`):
    None, or why it cannot be opened (an older schema: the command to run), in a line, instead of
    a traceback from every process."""
    from app.store import Store
    from app.store.database import UNOPENABLE, unopenable

    try:
        Store(url).close()
    except UNOPENABLE as exc:
        return unopenable(url, exc)
    return None


def _cannot_listen(host: str, port: int) -> int:
    """Ends serve when the address cannot be listened on (uvicorn said why, above)."""
    print(f"ampquiz serve: cannot serve on http://{host}:{port}/ (why is above)", file=sys.stderr)
    return 1


def _stopping() -> None:
    """From here on serve is stopping: another SIGTERM or Ctrl+C (a supervisor or a user who
    asks again) would break off the stop half-way, a traceback and a sandbox left to go alone."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _startup_cpus() -> set[int] | None:
    """The cores the web processes (and the bank's one read) start on: every core this process
    may use but one, left to the sandbox pool's start, a single thread (the zygote's torch import)
    and the longest part of start-up, which beside them got a third of a core. None with one core."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return set(cpus[:-1]) if len(cpus) > 1 else None


def _stop(*_: object) -> None:
    raise KeyboardInterrupt


def _serve_processes(settings: object, processes: int, common: dict, banner: str) -> int:
    """The web processes are forked by a process of their own (`app.web.server.preload`), which imports
    the web app and reads the bank once for all of them, and keeps them alive. Each builds its
    app from the environment (`create_app` reads `AMPQUIZ_*`), so what they must share goes there
    first. The pool starts before anything else: its torch import is the longest part of
    start-up, and no process can answer before it is done. Nothing here imports the web app."""
    from app.runs.pool_host import PoolHost
    from app.settings import Settings
    from app.web.server.preload import BANNER_ENV, GO, NOT_LISTENING, STARTUP_FAILED, UVICORN_ENV

    assert isinstance(settings, Settings)
    host = web = database = None
    # SIGTERM (a supervisor's stop) ends this process as Ctrl+C does: the web processes are told, and
    # waited for. It raises here itself: sent on as SIGINT, it did nothing where SIGINT came in
    # ignored (a shell script's `serve &`), and neither did the pool's failure below.
    signal.signal(signal.SIGTERM, _stop)
    try:
        if not settings.workers_url:
            # The pool starts while the web processes do; if it cannot, everything stops.
            host = PoolHost.for_settings(
                settings, on_failure=lambda _why: os.kill(os.getpid(), signal.SIGTERM)
            ).start()
            os.environ[Settings.env_name("workers_url")] = host.url
        os.environ[Settings.env_name("secret_key")] = (
            settings.resolved_secret_key()
        )  # made once, here
        for name in ("host", "port"):  # flags given on the command line reach the processes too
            os.environ[Settings.env_name(name)] = str(getattr(settings, name))
        cpus = _startup_cpus() if host is not None else None
        if cpus:  # read by `app.web.server.process`
            os.environ["_AMPQUIZ_STARTUP_CPUS"] = ",".join(map(str, sorted(cpus)))
        os.environ["_AMPQUIZ_SERVE_PID"] = str(os.getpid())  # each process goes when this one does
        os.environ[UVICORN_ENV] = json.dumps({**common, "workers": processes})
        os.environ[BANNER_ENV] = banner  # said there once the port is held
        web = subprocess.Popen(
            [sys.executable, "-m", "app.web.server.preload"], stdin=subprocess.PIPE
        )
        # The database's tables, made here while the web app is imported there; the web
        # processes are forked once this says the database is open (`preload.GO`).
        database = _database_problem(settings.database_url)
        if database:
            raise KeyboardInterrupt  # everything started stops, as on Ctrl+C; then serve says why
        assert web.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it ended already: its status says how
            web.stdin.write(GO)
            web.stdin.close()
        code = web.wait()
    except KeyboardInterrupt:
        # Ctrl+C reaches every process of the terminal's group, a signal sent to this process
        # only this one: either way the web processes are told once more, and waited for.
        # SIGTERM, which uvicorn takes as it takes Ctrl+C, and which no shell has them ignore.
        _stopping()
        code = 0
        if web is not None:
            web.send_signal(signal.SIGTERM)
            try:
                web.wait(timeout=common["timeout_graceful_shutdown"] + 5)
            except subprocess.TimeoutExpired:
                web.kill()
                web.wait()
    finally:
        _stopping()
        if host is not None:
            host.close()
    for failure in (database, host.failure if host is not None else None):
        if failure:
            print(f"ampquiz serve: {failure}", file=sys.stderr)
            return 1
    if code == STARTUP_FAILED:  # a web process said why (`app.web.server.process`)
        print(
            "ampquiz serve: stopped, as the web processes could not start (why is above)",
            file=sys.stderr,
        )
        return 1
    if code == NOT_LISTENING:  # uvicorn said why (a port in use, say)
        return _cannot_listen(settings.host, settings.port)
    if code < 0:  # killed unasked (the OOM killer, kill -9): its web processes went with it
        print(f"ampquiz serve: the web processes' parent ended (signal {-code})", file=sys.stderr)
        return 1
    if code > 0:  # it ended unasked (Ctrl+C reached it alone before it was told to start, say)
        print(f"ampquiz serve: the web processes' parent ended (status {code})", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from app.settings import settings_table

    epilog = "Settings (environment variables):\n" + "\n".join(
        "  " + line.replace("`", "").strip("| ").replace(" | ", "  —  ")
        for line in settings_table().splitlines()[2:]
    )
    p = sub.add_parser(
        "serve",
        help="start the web app (pages, JSON API, playground)",
        description="Start the web app. Defaults come from AMPQUIZ_* environment variables.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--host", default=None, help="address to listen on (default: AMPQUIZ_HOST or 127.0.0.1)"
    )
    p.add_argument("--port", type=int, default=None, help="port (default: AMPQUIZ_PORT or 8000)")
    p.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="log level",
    )
    p.add_argument("--no-access-log", action="store_true", help="do not log each request")
    p.add_argument(
        "--processes", type=int, default=None, metavar="N",
        help="web processes sharing the port and one sandbox pool (default: one per core)",
    )  # fmt: skip
    p.set_defaults(func=_cmd_serve)
