"""`ampquiz worker`: serve remote runs from this host's sandbox pool (see app.runs.worker).

Reads `AMPQUIZ_WORKERS_URL` (a `nats://` URL with the worker role's credentials, or
`AMPQUIZ_WORKERS_CREDS`), `AMPQUIZ_WORKERS_KEY` and `AMPQUIZ_SANDBOX_WORKERS` (its slots). Stops cleanly on SIGTERM or Ctrl+C: it stops taking runs,
finishes the ones it has, says goodbye, and closes its pool.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys


def run_forever(main: object) -> None:
    """uvloop where it is installed (it comes with uvicorn[standard]): less CPU per run."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)  # type: ignore[arg-type]
        return
    uvloop.run(main)  # type: ignore[arg-type]


def _cmd_worker(args: argparse.Namespace) -> int:
    from app.cli.common import remote_settings

    settings = remote_settings("worker", workers_url=args.url, sandbox_workers=args.slots)
    if settings is None:
        return 2
    from app.runs.jetstream import Broker

    broker = Broker.of(settings)
    if refused := broker.refusal():  # before the pool's start: it takes seconds
        print(f"ampquiz worker: {refused}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from app.runs.worker import Worker
    from sandbox import Sandbox

    pool = Sandbox(workers=settings.sandbox_workers, allow_cuda=not args.cpu)
    with pool:
        worker = Worker(pool, broker, settings.workers_key)

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, worker.stop)
            await worker.serve()

        import nats.errors

        try:
            run_forever(main())
        except (OSError, nats.errors.NoServersError) as exc:  # the NATS server cannot be reached
            print(f"ampquiz worker: cannot reach {broker.where()}: {exc}", file=sys.stderr)
            return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "worker", help="run snippets for remote web servers (NATS), from this host's sandbox"
    )
    p.add_argument("--url", default=None, help="NATS server (default: AMPQUIZ_WORKERS_URL)")
    p.add_argument(
        "--slots",
        type=int,
        default=None,
        help="runs at once (default: AMPQUIZ_SANDBOX_WORKERS or 2)",
    )
    p.add_argument("--cpu", action="store_true", help="serve CPU runs even on a host with a GPU")
    p.set_defaults(func=_cmd_worker)
