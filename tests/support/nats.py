"""A NATS server of the tests' own with users and permissions: `nats-server` started with the
committed `deploy/nats.conf` (what compose.yaml runs) on a free port, the passwords made up
here and handed to it through the environment, as compose hands them on.

The shared NATS server on 127.0.0.1:4222 has no users: the tests that use it run with
AMPQUIZ_BROKER_INSECURE=1 (`tests.support.workers`). The tests of who may do what on the broker
run against this one, one server per test module (`authenticated_nats`)."""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.cli import REPO

NATS_CONF = REPO / "deploy" / "nats.conf"
ROLES = ("web", "worker")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class AuthenticatedNats:
    """A running `nats-server -c deploy/nats.conf`, and the passwords of its users."""

    port: int
    passwords: dict[str, str]
    log: Path
    proc: subprocess.Popen

    def url(self, role: str | None = None, password: str | None = None) -> str:
        """The URL a `role` ("web", "worker") connects with (no role: no credentials at all)."""
        if role is None:
            return f"nats://127.0.0.1:{self.port}"
        return f"nats://{role}:{password or self.passwords[role]}@127.0.0.1:{self.port}"


@contextmanager
def authenticated_nats(workdir: Path) -> Iterator[AuthenticatedNats]:
    """`nats-server` with the committed configuration, each role's password made up for it."""
    binary = shutil.which("nats-server")
    if binary is None:
        raise RuntimeError("these tests need `nats-server` on the PATH (the NATS server's binary)")
    workdir.mkdir(parents=True, exist_ok=True)
    passwords = {role: secrets.token_urlsafe(16) for role in ROLES}
    env = {f"AMPQUIZ_NATS_{role.upper()}_PASSWORD": pw for role, pw in passwords.items()}
    port, log = _free_port(), workdir / "nats-server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [binary, "-c", str(NATS_CONF), "-a", "127.0.0.1", "-p", str(port),
             "-sd", str(workdir / "jetstream")],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = AuthenticatedNats(port, passwords, log, proc)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {log.read_text()[-2000:]}")
            if "Server is ready" in log.read_text():
                break
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
