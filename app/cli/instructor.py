"""`ampquiz instructor add|link|list|remove NAME`: who may use the studio (/studio).

`add` and `link` print a one-time sign-in link (valid for an hour): open it to sign in. The
command uses the same database as the server (AMPQUIZ_DATABASE_URL) and builds the link from
AMPQUIZ_HOST and AMPQUIZ_PORT, or from `--url` when the server is reached by another address.
"""

from __future__ import annotations

import argparse
import sys


def _cmd(args: argparse.Namespace) -> int:
    from app import instructors
    from app.settings import Settings, SettingsError
    from app.store import Store

    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"ampquiz instructor: {exc}", file=sys.stderr)
        return 2
    store = Store(settings.database_url)
    base = (args.url or f"http://{settings.host}:{settings.port}").rstrip("/")
    try:
        if args.action == "list":
            for name in instructors.names(store):
                print(name)
            return 0
        if args.name is None:
            print(f"ampquiz instructor {args.action}: give a NAME", file=sys.stderr)
            return 2
        if args.action == "remove":
            if not instructors.remove(store, args.name):
                print(f"ampquiz instructor: there is no instructor {args.name!r}", file=sys.stderr)
                return 1
            print(f"removed {args.name}")
            return 0
        if args.action == "add" and not instructors.add(store, args.name):
            print(f"{args.name} is already an instructor; a new sign-in link:", file=sys.stderr)
        token = instructors.new_link(store, args.name)
    except KeyError:
        print(
            f"ampquiz instructor: there is no instructor {args.name!r} (add one first)",
            file=sys.stderr,
        )
        return 1
    except ValueError as exc:
        print(f"ampquiz instructor: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(f"{base}/studio/sign-in/{token}")
    print("(works once, within an hour)", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("instructor", help="who may use the studio: add, link, list, remove")
    p.add_argument("action", choices=["add", "link", "list", "remove"])
    p.add_argument("name", nargs="?", help="the instructor's name")
    p.add_argument(
        "--url",
        default=None,
        help="the server's address for the link (default: AMPQUIZ_HOST:AMPQUIZ_PORT)",
    )
    p.set_defaults(func=_cmd)
