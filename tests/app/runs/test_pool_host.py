"""The pool host's socket folder: one a host killed outright left behind is removed by the next."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from app.runs import RunsFull
from app.runs.pool_host import PoolHost, PoolHostRuns
from sandbox import Limits, Sandbox


def test_a_killed_hosts_socket_folder_is_swept_by_the_next_and_a_live_ones_kept() -> None:
    """`serve` killed with SIGKILL never closes its pool host: its folder and socket stayed in
    the temporary folder for good, one per crash. The next host removes those whose process is
    gone, and leaves another running serve's alone."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    tmp = Path(tempfile.gettempdir())
    dead, alive = tmp / f"ampquiz-pool-{gone.pid}-test", tmp / f"ampquiz-pool-{os.getppid()}-test"
    for folder in (dead, alive):
        folder.mkdir()
        (folder / "pool.sock").touch()
    host = None
    try:
        host = PoolHost(pool=None)  # type: ignore[arg-type]  # the folder is made before any pool is used
        assert not dead.exists()
        assert (alive / "pool.sock").exists()
        assert host.folder.name.startswith(f"ampquiz-pool-{os.getpid()}-")
    finally:
        for folder in (dead, alive, *([host.folder] if host else [])):
            (folder / "pool.sock").unlink(missing_ok=True)
            if folder.exists():
                folder.rmdir()


@pytest.mark.own_pool
@pytest.mark.anyio
async def test_shares_and_turns_hold_for_every_web_process_together() -> None:
    """Two web processes (two clients of one pool host) sending one address's runs: its share
    (3 here) is counted across both, where each process once kept its own (a client without a
    cookie had 16 runs admitted for a share of 8), and a newcomer's run takes the next free
    worker before that address's waiting one, whichever process each came through."""
    host = PoolHost(Sandbox(workers=2), queue=4, per_learner=2, per_address=3).start()
    first = second = None
    try:
        first, second = [await PoolHostRuns.connect(str(host.path)) for _ in range(2)]
        ended: list[str] = []

        async def run(
            via: PoolHostRuns, name: str, owners: tuple[str, ...], seconds: float
        ) -> None:
            code = f"import time\ntime.sleep({seconds})\nprint('{name}')"
            result = await via.run_in_turn(code, Limits(wall_s=20), lane="learner", owners=owners)
            assert result.stdout == f"{name}\n", result
            ended.append(name)

        async def taken(in_flight: int) -> None:
            """Until the host's queue holds this many runs (running or waiting): the order of
            arrival is the test's, not the event loop's."""
            for _ in range(200):
                if host._turns is not None and host._turns.in_flight == in_flight:
                    return
                await asyncio.sleep(0.01)
            raise AssertionError(f"the pool host never held {in_flight} runs")

        flood = ("address:10.0.0.1",)
        runs = []
        for n, (via, seconds) in enumerate(((first, 2.0), (second, 4.0), (second, 1.5))):
            runs.append(
                asyncio.ensure_future(run(via, f"flood-{n}", (f"learner:{n}", *flood), seconds))
            )
            await taken(n + 1)  # flood-0 and flood-1 run, flood-2 waits
        with pytest.raises(RunsFull) as refused:
            await first.run_in_turn(
                "print('one too many')", Limits(), lane="learner", owners=("learner:9", *flood)
            )
        assert (refused.value.reason, refused.value.limit) == ("address", 3)
        # At 2 s a worker frees: the newcomer (nothing running) takes it before the flood's third
        # run (one running). First come, first served, flood-2 would run then and end at 3.5 s,
        # the newcomer only after flood-1, at 4.5 s.
        newcomer = asyncio.ensure_future(
            run(first, "newcomer", ("learner:new", "address:10.0.0.2"), 0.5)
        )
        await taken(4)
        await asyncio.gather(*runs, newcomer)
        assert ended.index("newcomer") < ended.index("flood-2"), ended
    finally:
        for client in (first, second):
            if client is not None:
                await client.close()
        host.close()
