"""`ampquiz serve [--host H] [--port P]`: the web app under uvicorn, configured by `AMPQUIZ_*`."""

from __future__ import annotations

import argparse
import logging
import sys


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.settings import Settings, SettingsError
    from app.web.factory import create_app

    try:
        settings = Settings.from_env(host=args.host, port=args.port)
    except SettingsError as exc:
        print(f"ampquiz serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()), format="%(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    print(
        f"ampquiz: serving on http://{settings.host}:{settings.port}/ (Ctrl+C stops)",
        file=sys.stderr,
    )
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=not args.no_access_log,
        timeout_graceful_shutdown=5,
    )
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
    p.set_defaults(func=_cmd_serve)
