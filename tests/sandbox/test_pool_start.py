"""Starting the pool fails with a message that says what happened: a zygote still importing torch
when its time was up is not a zygote that exited, and each is told apart from the other."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxError

REPO = Path(__file__).resolve().parents[2]


def zygotes_of_this_process() -> set[int]:
    """Live zygotes started by this test process (the session's shared pool has one too)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            if (
                int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid()
                and b"sandbox.zygote" in (entry / "cmdline").read_bytes()
            ):
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.mark.own_pool  # about starting a pool: this one never gets as far as a runner
def test_a_zygote_still_starting_when_its_time_is_up_did_not_start_and_is_stopped() -> None:
    before = zygotes_of_this_process()
    pool = Sandbox(workers=1, zygote_timeout_s=0.05)  # importing torch takes far longer than this
    with pytest.raises(SandboxError) as failed:
        pool.start()
    assert zygotes_of_this_process() - before == set()  # stopped, not left importing torch
    message = str(failed.value)
    assert "the sandbox zygote did not start within 0.05 s" in message, message
    assert "exited" not in message, message
    assert not pool.alive


def test_a_zygote_that_exits_while_starting_says_it_exited_with_its_code() -> None:
    """A server under an address-space limit too small for torch: the zygote's import fails and
    it exits at once. The message says so, with its code, and does not blame the clock."""
    start = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (300 << 20, 300 << 20))
        from sandbox import Sandbox
        Sandbox(workers=1, zygote_timeout_s=600).start()
    """)
    out = subprocess.run(
        [sys.executable, "-c", start],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0
    assert "SandboxError: the sandbox zygote exited with code 1 while starting" in out.stderr, (
        out.stderr[-2000:]
    )
    assert "did not start within" not in out.stderr
