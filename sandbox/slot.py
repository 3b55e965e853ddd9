"""One prepared runner, as the pool holds it (a slot): its channels, its cgroup's caps, and its end.

A slot is the server's handle on a runner forked by the zygote and waiting for code: the socket the
code goes down and the report comes back on, the output pipes, the zygote's account of its end, a
pidfd for the kill. `sandbox.collect` runs one snippet through it; `close` kills what is left of
the run and removes its cgroup, so nothing of a run outlives it.

Runs in: the server (the pool's threads, and the zygote link that receives the runner).
"""

from __future__ import annotations

import os
import select
import signal
import socket
from dataclasses import dataclass, field
from typing import Any

from sandbox.cgroup import RunCgroup
from sandbox.limits import Limits

# After the kill: the most time the cleanup waits for the runner to end before it looks at the
# cgroup anyway (a runner with many files or much memory takes longer than usual to end).
GONE_WAIT_S = 0.5


@dataclass
class Slot:
    pid: int
    """The runner's, as the pool sees it; the runner leads its own session."""
    sock: socket.socket
    out_fd: int
    err_fd: int
    status: socket.socket | None = None
    """The zygote's account of how the runner ended; the runner never holds this socket."""
    cgroup: dict[str, str] | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    """What the runner said when ready, before any untrusted code ran: protections included."""
    watch: int | None = None
    """A handle on the runner's /proc stat (`sandbox.ending.watch`), opened once it is ready."""
    base_memory: int = 0
    """What the prepared runner holds (torch, a CUDA context): memory caps come on top."""
    base_tasks: int = 1
    """Threads the prepared runner holds (1 on a CPU host; a CUDA runner holds the driver's too):
    the pids cap is what the snippet may add on top of them, as the memory cap is."""
    caps: tuple[int, int, float, int, int] | None = None
    """The cgroup's memory, processes, CPU and disk caps as written, as `Limits` fields."""
    pidfd: int | None = None
    """A handle on the runner (opened by the zygote before it could reap it): the kill goes to
    this process even after its pid is free again. None on kernels before 5.3."""
    closed: bool = False

    def set_caps(self, limits: Limits) -> None:
        """The run's cgroup caps; the pool writes the default ones while the runner waits, so a
        run with default limits pays for no write."""
        # The processes cap counts torch's extra threads (`Limits.torch_threads`) on top of the snippet's own.
        processes = limits.processes + max(0, limits.torch_threads - 1)
        want = (
            limits.memory_bytes,
            processes,
            limits.cpu_cores,
            limits.disk_bytes_per_s,
            limits.disk_ios_per_s,
        )
        if not self.cgroup or want == self.caps:
            return
        have = self.caps or (None,) * len(want)
        disk = want[3:] != have[3:]
        RunCgroup.from_paths(self.cgroup).set_limits(
            memory_bytes=self.base_memory + want[0] if want[0] != have[0] else None,
            processes=want[1] + self.base_tasks - 1 if want[1] != have[1] else None,
            cpu_cores=want[2] if want[2] != have[2] else None,
            disk_bytes_per_s=want[3] if disk else None,
            disk_ios_per_s=want[4] if disk else None,
        )
        self.caps = want

    def kill(self) -> None:
        """Kill the run and everything it started (the runner is pid 1 of its namespace; where
        there is none, its session and the cgroup still hold what it started).

        By its pidfd where there is one: a kill by pid, as root, came after the zygote had reaped
        the runner in a quarter of runs, and a pid is reused within seconds on a busy host."""
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        except OSError:
            return  # gone, and reaped: its number may be another process's now
        if "pid-namespace" not in self.environment.get("protections", ()):
            try:
                os.killpg(
                    self.pid, signal.SIGKILL
                )  # its session: the runner still holds the number
            except OSError:
                pass

    def _await_gone(self, within_s: float = GONE_WAIT_S) -> None:
        """Until the killed runner has ended, by its pidfd, so that its cgroup is found empty at
        the first look: the runner is pid 1 of its namespace, and the kernel ends every other
        process there before it lets the runner's own end be seen. Looking at the cgroup while
        the runner was still tearing down its memory took three reads of cgroup.procs a run, with
        a kill and a sleep between. Only a wait: the cgroup is still read, and emptied, after it."""
        if self.pidfd is None or "pid-namespace" not in self.environment.get("protections", ()):
            return
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        try:
            poller.poll(within_s * 1000)
        except OSError:
            pass

    def close(self) -> None:
        """Kill, remove the cgroup, release descriptors. Idempotent: fd numbers get reused."""
        if self.closed:
            return
        self.closed = True
        self.kill()
        if self.cgroup:
            self._await_gone()
            RunCgroup.from_paths(self.cgroup).remove()
        self.sock.close()
        for fd in (self.status, self.watch, self.pidfd):
            if isinstance(fd, socket.socket):
                fd.close()
            elif fd is not None:
                os.close(fd)
        for fd in (self.out_fd, self.err_fd):
            try:
                os.close(fd)
            except OSError:
                pass
