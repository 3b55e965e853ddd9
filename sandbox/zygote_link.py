"""The server's end of the zygote (`sandbox.zygote`): starting it with its configuration, asking it
to fork a runner, stopping it. `sandbox.pool.Sandbox` holds one; its refill thread is the only
thread that asks for runners (and restarts a zygote that died).

Runs in: the server.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from typing import Any

from sandbox import wire
from sandbox.isolation import SAFE_ENV
from sandbox.slot import Slot
from sandbox.visible import PACKAGE_ROOT

log = logging.getLogger("ampquiz.sandbox")


class SandboxError(RuntimeError):
    """The pool itself failed (not the snippet): the zygote died or could not start."""


class ZygoteLink:
    """One zygote process and its control socket. `timeout_s`: how long it may take to start
    (importing torch: several seconds on a busy host)."""

    def __init__(self, config: dict[str, Any], timeout_s: float) -> None:
        self.config = config
        self.timeout_s = timeout_s
        self.process: subprocess.Popen | None = None
        """The zygote's process (None before `start`, after `stop` or a first start that failed)."""
        self.control: socket.socket | None = None
        self.environment: dict[str, Any] = {}
        self.cgroups = False
        self.huge_page_bytes = 0
        """How much of the zygote's heap is on 2 MiB pages (cheaper forks); 0 where the host refused."""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Starts the zygote and waits for its hello (what it found on this host); SandboxError,
        saying why, when it dies or takes longer than `timeout_s` (it is stopped then)."""
        parent_end, child_end = socket.socketpair()
        # The configuration goes on the socket, not the command line: every runner inherits the
        # zygote's command line, and a snippet reads it as /proc/1/cmdline. The package is found
        # from the working folder (`-m` puts it on sys.path), so no path rides in the environment.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sandbox.zygote", str(child_end.fileno())],
            pass_fds=[child_end.fileno()],
            env=dict(SAFE_ENV),
            cwd=PACKAGE_ROOT,
            stdin=subprocess.DEVNULL,
        )
        child_end.close()
        self.control = parent_end
        parent_end.settimeout(self.timeout_s)
        timed_out = False
        try:
            wire.send(parent_end, self.config)
            hello = wire.recv(parent_end)
        except TimeoutError:
            hello, timed_out = None, True
        except OSError:
            hello = None
        if hello is None:
            raise self._failed(timed_out)
        parent_end.settimeout(None)
        self.environment = hello["environment"]
        self.cgroups = hello["cgroups"]
        self.huge_page_bytes = int(hello.get("huge_page_bytes", 0))
        if hello.get("syscall_filter", "ok") != "ok":
            log.warning("sandbox: %s", hello["syscall_filter"])

    def _failed(self, timed_out: bool) -> SandboxError:
        """Why the zygote never said hello, in words that tell the two cases apart: still busy
        when its time was up (killed now), or gone, with its exit code."""
        assert self.process is not None
        if not timed_out:
            try:  # it closed its end: it is exiting, or about to
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        code = self.process.poll()
        if code is None:
            self.process.kill()
            self.process.wait()
            if timed_out:
                return SandboxError(
                    f"the sandbox zygote did not start within {self.timeout_s:g} s "
                    "(it imports torch: is the host overloaded?); it was stopped"
                )
            return SandboxError(
                "the sandbox zygote stopped answering while starting; it was stopped"
            )
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return SandboxError(f"the sandbox zygote {how} while starting (is torch importable?)")

    def forget(self) -> None:
        """After a first start that failed: nothing is running, and `start` may be tried again."""
        self.process = None
        if self.control:
            self.control.close()

    def fork(self) -> Slot:
        """A new runner, forked and preparing itself (not ready yet)."""
        assert self.control is not None
        wire.send(self.control, {"type": "spawn"})
        reply, fds = wire.recv_with_fds(self.control, 5)
        if reply is None:
            raise SandboxError("the sandbox zygote stopped answering")
        if len(fds) not in (4, 5):  # the fifth, a pidfd, where the kernel has them
            for fd in fds:
                os.close(fd)
            raise SandboxError(f"the sandbox zygote could not fork: {reply.get('message', reply)}")
        return Slot(
            reply["pid"],
            socket.socket(fileno=fds[0]),
            fds[1],
            fds[2],
            socket.socket(fileno=fds[3]),
            pidfd=fds[4] if len(fds) == 5 else None,
        )

    def stop(self) -> None:
        """Asks the zygote to stop (it takes its runners with it), killing it after 5 s."""
        assert self.process is not None
        try:
            assert self.control is not None
            wire.send(self.control, {"type": "stop"})
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.control:
            self.control.close()
        self.process = None
