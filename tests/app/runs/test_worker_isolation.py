"""What a worker's snippets cannot reach, and what a worker leaves behind when it is killed."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from app.runs.remote import RemoteRuns
from tests.support.workers import (
    NATS_URL,
    QUICK,
    Start,
    command_lines,
    process_tree,
    still_running,
    until,
)

pytestmark = pytest.mark.anyio

REACH = """
import socket
for family, address in {targets!r}:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(address)
        print(address, "connected")
    except OSError as exc:
        print(address, "failed:", type(exc).__name__)
    finally:
        s.close()
"""


def host_addresses() -> list[str]:
    """This host's own IPv4 addresses, loopback included (the kernel's table of local ones)."""
    lines = Path("/proc/net/fib_trie").read_text().splitlines()
    found = {
        previous.split()[-1]
        for previous, line in itertools.pairwise(lines)
        if "/32 host LOCAL" in line
    }
    return sorted(found)


async def test_cant_reach_the_nats_server_or_any_host_socket_from_a_worker_run(
    web: RemoteRuns, start: Start
) -> None:
    await start(1)
    short = tempfile.TemporaryDirectory(prefix="aq-")  # a Unix socket's path has at most 107 bytes
    tmp_path = Path(short.name)
    nats = urlparse(NATS_URL)
    listening = socket.create_server(("0.0.0.0", 0))  # a port of the host on every address
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(tmp_path / "host.sock"))
    unix.listen()
    targets: list[tuple[int, object]] = [(socket.AF_INET, (nats.hostname, nats.port))]
    targets += [
        (socket.AF_INET, (address, listening.getsockname()[1])) for address in host_addresses()
    ]
    targets.append((socket.AF_UNIX, str(tmp_path / "host.sock")))
    postgres = "/var/run/postgresql/.s.PGSQL.5432"
    if os.path.exists(postgres):  # a service's Unix socket, where there is one
        targets.append((socket.AF_UNIX, postgres))
    for family, address in targets:  # reachable from the host, so a failure below is the sandbox's
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect(address)
    result = await web.run(
        REACH.format(targets=[(int(family), address) for family, address in targets]), QUICK
    )
    assert result.status == "ok", result
    lines = result.stdout.splitlines()
    assert len(lines) == len(targets)
    assert all(" failed: " in line for line in lines), result.stdout
    listening.close()
    unix.close()
    short.cleanup()


async def test_a_worker_killed_by_sigkill_leaves_no_process_of_its_pool(
    web: RemoteRuns, start: Start
) -> None:
    (worker,) = await start(1, slots=2)
    running = asyncio.ensure_future(
        web.run("import time\ntime.sleep(30)", QUICK)
    )  # a runner mid-run too
    await until(lambda: any(w["busy"] for w in web.online()))
    tree = process_tree(worker.proc.pid)
    assert len(tree) >= 3, tree  # its zygote and prepared runners, and the busy one
    os.kill(worker.proc.pid, signal.SIGKILL)  # the worker alone: its pool must go with it
    worker.proc.wait()
    deadline = time.monotonic() + 10
    while (left := still_running(tree)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert left == [], command_lines(left)
    running.cancel()
