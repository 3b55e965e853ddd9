"""`ampquiz verify --remote`: the bank proved on the workers online, one record per environment."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.support.cli import REPO
from tests.support.server import BANK
from tests.support.workers import WORKERS_ENV, WorkerProcess, reset_stream


def ampquiz(
    *args: str, key: str = WORKERS_ENV["AMPQUIZ_WORKERS_KEY"]
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **WORKERS_ENV, "AMPQUIZ_WORKERS_KEY": key}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], check=False, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def verify_remote(
    bank: Path, key: str = WORKERS_ENV["AMPQUIZ_WORKERS_KEY"]
) -> subprocess.CompletedProcess[str]:
    return ampquiz("verify", str(bank), "--remote", "--record", key=key)


def test_verify_remote_writes_the_record_of_the_workers_environment(tmp_path: Path) -> None:
    asyncio.run(reset_stream())
    bank = tmp_path / "bank"
    shutil.copytree(BANK, bank, ignore=shutil.ignore_patterns("verified"))
    nobody = verify_remote(bank)
    assert nobody.returncode == 2 and "no worker is online" in nobody.stderr

    worker = WorkerProcess(tmp_path / "gpu-host", slots=2)
    try:
        deadline = time.monotonic() + 90
        while " slots on " not in worker.log.read_text():  # its pool is up and it is online
            assert time.monotonic() < deadline, worker.log.read_text()
            time.sleep(0.2)
        # An instructor given the wrong key hears the worker but cannot believe it: told so, and
        # nothing runs on it.
        wrong_key = "not-the-workers-key-" + "w" * 32
        mistaken = verify_remote(bank, key=wrong_key)
        listed = ampquiz("workers", key=wrong_key)
        done = verify_remote(bank)
    finally:
        worker.stop()
    assert mistaken.returncode == 2 and "no worker is online" in mistaken.stderr
    assert "signed with a key other than this AMPQUIZ_WORKERS_KEY" in mistaken.stderr, (
        mistaken.stderr
    )
    assert (
        listed.returncode == 1
        and "signed with a key other than this AMPQUIZ_WORKERS_KEY" in listed.stdout
    )
    assert "signed with a key other" not in nobody.stderr  # nobody at all answered the first time
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed, 0 skipped on cpu" in done.stdout
    record = json.loads((bank / "verified" / "cpu-torch2.13.0.json").read_text())
    assert record["environment"]["device_kind"] == "cpu" and record["environment"]["python_version"]
    assert {k: v["result"] for k, v in record["results"].items()} == {
        "linear-dtype-under-autocast": "pass", "gradscaler-skips-inf-step": "pass",
    }  # fmt: skip
    assert "(delivery 1)" in worker.log.read_text()  # the runs went through the worker
