"""The zygote: one process that imports torch once, then forks a fresh, isolated process per run.

Started by `sandbox.pool.Sandbox` as `python -m sandbox.zygote FD`, FD being its control socket;
its configuration comes as the first message there, never on its command line (which every runner
inherits, and a snippet can read as /proc/1/cmdline: it names paths the runner must not see).
It never touches CUDA, so every fork starts clean (a child of a process that initialised CUDA
could not use it). On a CPU host it runs a few tensor ops once, so that torch's first-op costs
are paid here rather than in every runner; it stays single-threaded (OMP_NUM_THREADS=1 and one
intra-op thread), as a process that forks must. It has every run's read-only root built once
(`sandbox.root_template`). For each `spawn` request it forks a *runner*:

    zygote ── runner (pid 1 of a new pid namespace; new net, mount, ipc, uts namespaces; its cgroup)

The runner (`sandbox.runner`) prepares itself and waits; when the pool sends code it runs the
snippet once, then exits. The zygote reaps it and reports how it ended (a signal, an exit code,
its CPU time) on a socket of its own per runner, which the runner never holds: the one account of
a run its snippet cannot write (`sandbox.ending`). When the runner dies, the kernel kills
everything left in its pid namespace.

The runner is forked straight into its pid namespace (the zygote unshares one for its next child,
then returns to its own), not through an intermediate process: on a 2-core host a second fork and
exit of a torch-sized process per run cost about a quarter of the sandbox's CPU.

Runs in: the zygote (started as `python -m sandbox.zygote`).
"""

from __future__ import annotations

import gc
import os
import selectors
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from sandbox import gpu_probe, isolation, root_template, runner, seccomp, wire
from sandbox.cgroup import CgroupFactory


def _warm_imports() -> None:
    """Import what snippets use, so a run never pays for it. No tensor op runs here."""
    import torch

    # Creating any optimizer imports torch._dynamo (~800 modules, ~1.7 s here): pay it once, here.
    import torch._dynamo
    import torch.amp
    import torch.nn
    import torch.nn.functional
    import torch.optim
    import torch.overrides
    import torch.utils._python_dispatch
    import torch.utils.checkpoint  # noqa: F401

    import sandbox.execute

    try:
        import sandbox.explain  # noqa: F401
    except ImportError:
        pass


def _filters_after_importing_torch() -> list[Any]:
    """The warning filters of a fresh `python snippet.py` once its `import torch` ran: Python's
    defaults (a DeprecationWarning shown only from the snippet's own code, library ones and
    ResourceWarnings hidden) with what torch's import adds before and after them. A snippet runs
    under these, as it would on the learner's machine: under the filter "always", a warning
    raised three times from one line was seen three times (`catch_warnings(record=True)` counted
    3 where Python counts 1), and warnings Python hides were shown, and so provable as a key.
    The rest of the warm-up's imports (torch._dynamo's, say) add none of theirs: a fresh
    `import torch` does not import them. Called first, before anything has imported torch."""
    import warnings

    defaults = list(warnings.filters)
    with warnings.catch_warnings():  # its notices are not any snippet's
        warnings.simplefilter("ignore")
        ours = warnings.filters[0]
        import torch  # noqa: F401 - its import adds its filters

        now = list(warnings.filters)
    # torch inserts its filters ahead of the others (filterwarnings' default), or appends them.
    at = next(i for i, f in enumerate(now) if f is ours)
    return now[:at] + defaults + now[at + 1 + len(defaults) :]


def _use_filters(filters: list[Any]) -> None:
    """Makes `filters` the process's warning filters, as each runner inherits them."""
    import warnings

    warnings.filters[:] = filters  # type: ignore[index]  # a list; typeshed says Sequence
    mutated = getattr(
        warnings, "_filters_mutated", None
    )  # every "once"/"default" record made before is stale
    if mutated is not None:
        mutated()


PREPARING_NICE_STEP = 10
"""How much nicer than the server the zygote, and a runner until its preparation is done, run."""

_HUGE_PAGE = 2 << 20
RECOLLAPSE_EVERY = 64
"""Spawns between two collapses of the heap back onto 2 MiB pages (see `Zygote.serve`)."""
_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25  # Linux 6.1+


def _back_heap_with_huge_pages() -> int:
    """Moves the zygote's private heap (~210 MB after importing torch) onto 2 MiB pages; returns
    how many bytes were moved.

    A fork copies one page-table entry per 4 KiB page and an exit tears them down again: with huge
    pages that is one entry per 2 MiB, and each run's fork and exit cost about 3 ms less CPU. A
    runner writing to the heap still copies only the 4 KiB it touches. Best effort: where the host
    has transparent huge pages off, or a kernel without MADV_COLLAPSE, nothing changes.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    moved = 0
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return 0
    for line in maps:
        fields = line.split()
        name = fields[5] if len(fields) > 5 else ""
        if fields[1] != "rw-p" or name not in ("", "[heap]"):
            continue  # only private anonymous memory: files and stacks stay as they are
        low, high = (int(x, 16) for x in fields[0].split("-"))
        start, end = (low + _HUGE_PAGE - 1) & ~(_HUGE_PAGE - 1), high & ~(_HUGE_PAGE - 1)
        if end - start < _HUGE_PAGE:
            continue
        libc.madvise(start, end - start, _MADV_HUGEPAGE)
        if libc.madvise(start, end - start, _MADV_COLLAPSE) == 0:
            moved += end - start
    return moved


def _skip_logging_lock_renewal() -> None:
    """Leaves out `logging`'s renewal of every handler's lock in each runner it forks.

    After a fork, Python's `logging` gives each handler made so far a new lock, in case another
    thread held it at the fork. torch's import makes ~38 handlers, spread over the heap: renewing
    them wrote to pages the runner shares with this process, about 70 page faults and 0.25 ms of
    CPU in every runner before its first line. This process has one thread (forking runners needs
    it), so no handler's lock is ever held at a fork: there is nothing to renew. The module's own
    lock, which `logging` takes before a fork, is still released in the child."""
    import logging

    handlers = getattr(logging, "_at_fork_reinit_lock_weakset", None)
    if handlers is not None:
        handlers.clear()


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):  # a kernel before 5.3
        return None


def _exit_message(status: int, usage: Any) -> dict[str, Any]:
    cpu_s = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        return {"type": "exit", "signal": os.WTERMSIG(status), "code": None, "cpu_s": cpu_s}
    return {"type": "exit", "signal": None, "code": os.WEXITSTATUS(status), "cpu_s": cpu_s}


class Zygote:
    """The zygote's state: its control socket, and the report socket of each live runner."""

    def __init__(
        self,
        control: socket.socket,
        config: dict[str, Any],
        cgroups: CgroupFactory,
        *,
        huge_pages: bool,
    ) -> None:
        self.control = control
        self.huge_pages = huge_pages
        """The heap went onto 2 MiB pages at start: keep it there (`serve`)."""
        self.config = config
        self.cgroups = cgroups
        self.spawned = 0
        self.uid_offset = int.from_bytes(os.urandom(2)) % 50000
        """Where this zygote starts in the uid range: a restarted pool, or a second one on the host,
        does not hand its runs the uids an earlier run just had."""
        self.live: dict[int, socket.socket] = {}
        """Runner pid -> the zygote's end of its status socket, for the exit message."""
        self.own_pid_ns = isolation.open_own_pid_namespace()
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        # SIGCHLD only wakes the loop (a byte on this pipe); reaping happens in the loop, never
        # in the middle of a spawn.
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.wake_w = wake_w

    def serve(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.control, selectors.EVENT_READ)
            sel.register(self.wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select():
                    if key.fileobj == self.wake_r:
                        while True:
                            try:
                                if not os.read(self.wake_r, 4096):
                                    break
                            except BlockingIOError:
                                break
                        self.reap()
                        continue
                    request = wire.recv(self.control)
                    if request is None or request.get("type") == "stop":
                        return
                    try:
                        self.spawn()
                    except OSError as exc:  # out of pids or fds for a moment: say so, keep serving
                        wire.send(self.control, {"type": "spawn_failed", "message": repr(exc)})
                    if self.huge_pages and self.spawned % RECOLLAPSE_EVERY == 0:
                        _back_heap_with_huge_pages()

    def reap(self) -> None:
        """Collects every ended child; tells the pool how each runner ended, on its socket."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            sock = self.live.pop(pid, None)
            if sock is None:
                continue  # an orphan reparented here (hosts without pid namespaces)
            try:
                sock.setblocking(False)  # the pool may have stopped reading: never wait on it
                wire.send(sock, _exit_message(status, usage))
            except OSError:
                pass
            sock.close()

    def spawn(self) -> None:
        parent_end, child_end = socket.socketpair()
        status_pool, status_zygote = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.spawned += 1
        config = {
            **self.config,
            # A uid of its own per run: its process cap counts only its own processes; it owns nothing.
            "uid": self.config["uid_base"] + (self.uid_offset + self.spawned) % 50000,
            "cgroup_name": f"ampquiz-run-{os.getpid()}-{self.spawned}-{os.urandom(4).hex()}",
            "pid_namespace": self.own_pid_ns is not None
            and isolation.new_pid_namespace_for_next_child(),
        }
        try:
            pid = os.fork()
        except OSError:
            self._back_to_own_pid_namespace(config)
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            for sock in (parent_end, child_end, status_pool, status_zygote):
                sock.close()
            raise
        if pid == 0:
            self._close_in_child(out_r, err_r, parent_end, status_pool, status_zygote)
            runner.run_runner(config, child_end, out_w, err_w, self.cgroups)
        self._back_to_own_pid_namespace(config)
        self.live[pid] = status_zygote
        child_end.close()
        os.close(out_w)
        os.close(err_w)
        fds = [parent_end.fileno(), out_r, err_r, status_pool.fileno()]
        # A handle that names this process and no later one with its pid: opened before this
        # loop can reap it, so the pool's kill never lands on a process that reused the number.
        handle = _pidfd(pid)
        if handle is not None:
            fds.append(handle)
        wire.send(self.control, {"type": "spawned", "pid": pid}, fds=fds)
        for sock in (parent_end, status_pool):
            sock.close()
        for fd in (out_r, err_r, *([handle] if handle is not None else [])):
            os.close(fd)

    def _back_to_own_pid_namespace(self, config: dict[str, Any]) -> None:
        if config["pid_namespace"]:
            assert self.own_pid_ns is not None
            # Cannot fail on a host that let us unshare; if it did, every later runner would be
            # forked into a dead namespace: better to stop and be restarted by the pool.
            try:
                isolation.enter_pid_namespace_for_children(self.own_pid_ns)
            except OSError:
                os._exit(70)

    def _close_in_child(self, out_r: int, err_r: int, *socks: socket.socket) -> None:
        signal.set_wakeup_fd(-1)
        for fd in (
            self.wake_r,
            self.wake_w,
            out_r,
            err_r,
            *([self.own_pid_ns] if self.own_pid_ns is not None else []),
        ):
            os.close(fd)
        for sock in (self.control, *socks, *self.live.values()):
            sock.close()


def main() -> None:
    # Ctrl+C in a terminal reaches the whole foreground process group, the zygote included: the
    # server shuts the pool down (and so this process), which is the only stop it needs; a
    # KeyboardInterrupt here would only print a traceback in the middle of that.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.chdir("/")  # started in the package's folder, so `-m sandbox.zygote` finds it; holds nothing
    # A socket belongs to the network namespace it was made in, whichever one its holder enters
    # later: each runner's control socket is made here, and a run reached the host's interfaces
    # through it (SIOCGIFCONF and SIOCGIFHWADDR on it listed the host's addresses and MAC
    # addresses). Made in a namespace of the zygote's own, there is nothing to see. Its link to
    # the pool (a socket made before) is unaffected; the runners still enter one of their own.
    isolation.leave_host_network()
    control = socket.socket(fileno=int(sys.argv[1]))
    config = wire.recv(control)
    if config is None:
        return
    import warnings

    snippet_filters = _filters_after_importing_torch()
    with warnings.catch_warnings():  # import-time notices (e.g. no NumPy) are not any snippet's
        warnings.simplefilter("ignore")
        _warm_imports()

        runner.remember_zygote_seed()  # before any fork: each runner reseeds as a fresh process would
        gpu = gpu_probe.probe() if config.get("allow_cuda", True) else gpu_probe.NO_GPU
        config["cuda"] = gpu["cuda"]
        # torch's first-op costs, once here instead of in every runner (about 5 ms of CPU and
        # 600 page faults each): on a CPU host only. A process that initialised CUDA has children
        # that cannot use it, so on a CUDA host each runner still pays them itself.
        if not config["cuda"]:
            runner.warm_up_first_ops("cpu")
    if config["cuda"]:  # the runners start CUDA inside their own root: the driver must be in it
        hidden = [h.rstrip("/") + "/" for h in config["hide"]]
        shown = [d for d in gpu["driver_dirs"] if not any((d + "/").startswith(h) for h in hidden)]
        config["keep"] = sorted(
            {*config["keep"], *shown}
        )  # never a hidden folder (a library there)
    _use_filters(snippet_filters)
    seccomp.prepare()  # compiled once; each runner only loads it
    # Every runner's read-only root, built once (None where the host refuses: each runner then
    # builds its own), by a helper forked before the heap goes onto huge pages, so that this
    # process's writes after that fork split none of them. Not on a CUDA host (untested there):
    # the driver's device nodes can appear after start (/dev/nvidia-uvm, on first use), and a
    # runner that lists /dev itself still finds them.
    config["root_template"] = (
        None
        if config["cuda"]
        else root_template.build(
            config["keep"], config["hide"], tmp_bytes=config["tmp_bytes"], cuda=False
        )
    )
    # Every object so far (torch's ~280k) moves out of the collector's reach. Otherwise the first
    # full collection in a runner writes to each of them, copying the zygote's whole heap page by
    # page: about 170 ms of CPU in that run instead of 0.5 ms.
    gc.freeze()
    _skip_logging_lock_renewal()
    huge_page_bytes = _back_heap_with_huge_pages()
    cgroups = CgroupFactory()
    cgroups.sweep()
    try:  # orphans (hosts without pid namespaces) are reparented here and reaped, never zombies
        isolation.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    except OSError:
        pass
    # The same for every runner (it reads /proc/cpuinfo): described once, here.
    config["environment"] = runner.describe_environment(config["cuda"], gpu["device_name"])
    # Forking a runner (copying the page tables of a torch-sized heap) happens while the run it
    # replaces executes and its result is delivered: at a higher nice value, it yields to both.
    # Only where a runner (root while it prepares) can come back down before its snippet runs.
    config["run_nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    if isolation.may_lower_nice(config["run_nice"]):
        os.setpriority(os.PRIO_PROCESS, 0, min(19, config["run_nice"] + PREPARING_NICE_STEP))
    zygote = Zygote(control, config, cgroups, huge_pages=huge_page_bytes > 0)
    wire.send(
        control,
        {
            "type": "zygote",
            "environment": config["environment"],
            "cgroups": cgroups.available,
            "huge_page_bytes": huge_page_bytes,
            "syscall_filter": seccomp.PROBLEM or "ok",
        },
    )
    zygote.serve()


if __name__ == "__main__":
    main()
