"""`ampquiz interview new --questions ID,ID,… [--minutes N]` and `ampquiz interview revoke TOKEN`.

`new` prints the two links, the candidate's first (share it), then the interviewer's (keep it:
it is the only way in, and it is stored only as a hash). Same database as the server
(AMPQUIZ_DATABASE_URL); the links are built from AMPQUIZ_HOST and AMPQUIZ_PORT, or `--url`.
"""

from __future__ import annotations

import argparse
import sys


def _cmd(args: argparse.Namespace) -> int:
    from app.bank.load import load_bank
    from app.interview import model
    from app.settings import Settings, SettingsError
    from app.store import Store
    from app.verify.record import contradicted, load_records

    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"ampquiz interview: {exc}", file=sys.stderr)
        return 2
    base = (args.url or f"http://{settings.host}:{settings.port}").rstrip("/")
    store = Store(settings.database_url)
    try:
        if args.action == "revoke":
            token = (args.token or "").rstrip("/").rsplit("/", 1)[-1]
            if not token or not model.revoke_candidate_token(store, token):
                print(
                    "ampquiz interview: no open interview has that candidate link", file=sys.stderr
                )
                return 1
            print("revoked")
            return 0
        ids = [q.strip() for q in (args.questions or "").split(",") if q.strip()]
        bank = load_bank(settings.bank)
        unknown = [q for q in ids if bank.question(q) is None]
        if unknown:
            print(
                f"ampquiz interview: there is no question {unknown[0]!r} in {settings.bank}",
                file=sys.stderr,
            )
            return 1
        # The committed records are what this command can read of the proofs (the server holds a
        # key back on its own runs too, and tells the candidate then): a key they contradict
        # could be graded on no candidate, and the studio refuses it as well.
        records = load_records(settings.bank)
        for loaded in (bank.question(q) for q in ids):
            assert loaded is not None
            if (said := contradicted(records, loaded)) is not None:
                print(f"ampquiz interview: the key of {loaded.id!r} is under review ({said.label}): "
                      "no candidate could be graded on it", file=sys.stderr)  # fmt: skip
                return 1
        try:
            made = model.create(store, ids, by=args.by, minutes=args.minutes)
        except ValueError as exc:
            print(f"ampquiz interview: {exc}", file=sys.stderr)
            return 2
    finally:
        store.close()
    print(f"{base}/interview/{made.candidate_token}")
    print(f"{base}/interviewer/{made.host_token}")
    print(
        "(first the candidate's link, then the interviewer's: keep that one to yourself)",
        file=sys.stderr,
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "interview",
        help="make an interview (prints the candidate's and the interviewer's links), or revoke one",
    )
    p.add_argument("action", choices=["new", "revoke"])
    p.add_argument("token", nargs="?", help="revoke: the candidate's link or token")
    p.add_argument("--questions", help="new: question ids, comma-separated, in order")
    p.add_argument(
        "--minutes",
        type=int,
        default=None,
        help="new: a time limit (the candidate may extend it by half)",
    )
    p.add_argument(
        "--by",
        default="the command line",
        help="new: who made it (shown in the report; default: the command line)",
    )
    p.add_argument(
        "--url",
        default=None,
        help="the server's address for the links (default: AMPQUIZ_HOST:AMPQUIZ_PORT)",
    )
    p.set_defaults(func=_cmd)
