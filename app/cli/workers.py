"""`ampquiz workers [--url URL] [--json]`: the sandbox workers online on a NATS server, with what
each can run, its slots in use, and the runs it did and failed. Exit 1 when none is online."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.runs.jetstream import Broker


async def ask(broker: Broker, key: str, wait_s: float = 1.0) -> tuple[list[dict[str, Any]], int]:
    """The workers that answer within `wait_s`, believed only when signed with the workers' key,
    and how many answers came signed with another key. (As the web's role: it pings, and reads
    what workers say.)"""
    from app.runs import jetstream as layout
    from app.runs.signing import Signer, read_announcement, signed_with_another_key

    url = broker.url
    signer = Signer(key)
    nc = await layout.connect(broker, "ampquiz-workers", "web", reconnect=False)
    answers: dict[str, dict[str, Any]] = {}
    other_key = 0

    async def took(msg: Any) -> None:
        nonlocal other_key
        if not msg.data:  # the server's "no responders" notice: nobody answered
            return
        data = read_announcement(signer, msg.data, msg.headers)
        if data is not None and not data.get("leaving"):
            data.pop("holding", None)  # its runs' ids: the web's business only
            answers[data["id"]] = data
        other_key += data is None and signed_with_another_key(signer, msg.data, msg.headers)

    inbox = nc.new_inbox()
    await nc.subscribe(inbox, cb=took)
    await nc.publish(layout.Layout.of(url).ping_subject, b"", reply=inbox)
    await asyncio.sleep(wait_s)
    await nc.close()
    return sorted(answers.values(), key=lambda w: w["id"]), other_key


def _cmd_workers(args: argparse.Namespace) -> int:
    from app.cli.common import remote_settings
    from app.runs.signing import nobody_online

    settings = remote_settings("workers", workers_url=args.url)
    if settings is None:
        return 2
    from app.runs.jetstream import Broker, BrokerRefused

    broker = Broker.of(settings)
    url = broker.where()
    try:
        workers, other_key = asyncio.run(ask(broker, settings.workers_key))
    except BrokerRefused as exc:
        print(f"ampquiz workers: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - unreachable, refused: said in one line
        print(f"ampquiz workers: cannot reach {url}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(workers, indent=2))
    elif not workers:
        print(nobody_online(url, other_key))
    else:
        for w in workers:
            up = time.time() - float(w.get("started") or time.time())
            cuda = f", CUDA {w['cuda_version']}" if w.get("cuda_version") else ""
            print(f"{w['id']}: {w.get('device_kind')} ({w.get('device_name')}), torch {w.get('torch_version')}{cuda} · "
                  f"{w.get('busy', 0)}/{w.get('slots')} slots busy · {w.get('done', 0)} runs, "
                  f"{w.get('failed', 0)} failed · up {up:.0f} s")  # fmt: skip
    return 0 if workers else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workers", help="list the sandbox workers online (remote runs over NATS)")
    p.add_argument("--url", default=None, help="NATS server (default: AMPQUIZ_WORKERS_URL)")
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func=_cmd_workers)
