"""The pool host's socket folder: one a host killed outright left behind is removed by the next."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from app.runs.pool_host import PoolHost


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
