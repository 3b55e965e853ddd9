"""`ampquiz status [--url URL] [--json]`: what a running server serves, and what it holds back.

Asks the server's /healthz (the default URL comes from AMPQUIZ_HOST and AMPQUIZ_PORT, as for
`ampquiz serve`) and prints how each answer key is proved, every question held back because its
run contradicts its key (with the diff), and every file left out of the bank. Exit 0 when nothing
is held back or left out, 1 when something is, 2 when the server cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any


def _fetch(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/healthz", timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:  # 503: up, but not everything works; the body says what
        return json.loads(exc.read())


def _print(url: str, health: dict[str, Any]) -> None:
    sandbox = health.get("sandbox") or {}
    state = "ok" if health.get("ok") else "NOT OK"
    print(f"server {url}: {state} · {health.get('questions')} questions in {health.get('sets')} sets · "
          f"sandbox {sandbox.get('device_kind')}, torch {sandbox.get('torch_version')}")  # fmt: skip
    proofs = health.get("proofs") or {}
    counts = proofs.get("counts") or {}
    if counts:
        print(f"answer keys: {counts.get('proved', 0)} proved by running, {counts.get('conceptual', 0)} conceptual, "
              f"{counts.get('elsewhere', 0)} need another device ({proofs.get('elsewhere_proved', 0)} proved there), "
              f"{counts.get('pending', 0)} being verified, {counts.get('held_back', 0)} held back")  # fmt: skip
    held = proofs.get("held_back") or []
    if held:
        print(f"held back ({len(held)}): not graded until the key is fixed")
        for q in held:
            print(f"  {q['file']}  {q['id']}: {q['reason']}")
            if q.get("diff"):
                print("    " + q["diff"].replace("\n", "\n    "))
    problems = health.get("problems") or []
    if problems:
        print(f"left out of the bank ({len(problems)}):")
        for problem in problems:
            print(f"  {problem}")


def _cmd_status(args: argparse.Namespace) -> int:
    url = args.url
    if url is None:
        from app.settings import Settings, SettingsError

        try:
            settings = Settings.from_env()
        except SettingsError as exc:
            print(f"ampquiz status: {exc}", file=sys.stderr)
            return 2
        url = f"http://{settings.host}:{settings.port}"
    try:
        health = _fetch(url)
    except (OSError, ValueError) as exc:
        print(f"ampquiz status: no ampquiz server answers at {url}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(health, indent=2, ensure_ascii=False))
    else:
        _print(url, health)
    held = (health.get("proofs") or {}).get("held_back") or []
    return 1 if held or health.get("problems") else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status", help="what a running server serves, and which questions it holds back"
    )
    p.add_argument(
        "--url", default=None, help="the server (default: http://AMPQUIZ_HOST:AMPQUIZ_PORT)"
    )
    p.add_argument("--json", action="store_true", help="print the server's /healthz as JSON")
    p.set_defaults(func=_cmd_status)
