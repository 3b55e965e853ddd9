"""`ampquiz serve` in a subprocess, as a user starts it, for the browser tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.cli import REPO

BANK = REPO / "tests" / "browser" / "bank"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`ampquiz serve` as a user starts it, configured only through AMPQUIZ_* variables."""

    def __init__(
        self, workdir: Path, bank: Path = BANK, args: tuple[str, ...] = ("--processes", "1")
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "server.log"
        self.proc: subprocess.Popen | None = None
        self.args = args
        """More `ampquiz serve` flags (`--processes 2`)."""
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "AMPQUIZ_DATABASE_URL": f"sqlite:///{workdir / 'data' / 'ampquiz.db'}",
            "AMPQUIZ_BANK": str(bank),
            "AMPQUIZ_PORT": str(self.port),
        }

    def start(self, healthy: bool = True) -> None:
        """Until /healthz answers 200 (or, with `healthy=False`, answers at all: a server whose
        remote workers are not online yet is up but says 503)."""
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve", "--no-access-log", *self.args],
                cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code in (
                    (200,) if healthy else (200, 503)
                ):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server did not start: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)  # as Ctrl+C: uvicorn shuts down, the sandbox closes
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def instructor_link(self, name: str) -> str:
        """`ampquiz instructor add NAME` against this server's database: its one-time sign-in link."""
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", "instructor", "add", name, "--url", self.url],
            env=self.env, cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return out.stdout.strip()

    def restart(self) -> None:
        self.stop()
        self.start()
