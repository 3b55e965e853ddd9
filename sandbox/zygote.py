"""The zygote: one process that imports torch once, then forks a fresh, isolated process per run.

Started by `sandbox.pool.Sandbox` as `python -m sandbox.zygote FD CONFIG_JSON`, FD being its
control socket. It never runs a tensor op nor touches CUDA, so every fork starts clean (a child of a
process that initialised CUDA could not use it). For each `spawn` request it forks a *runner*:

    zygote ── runner (pid 1 of a new pid namespace; new net, mount, ipc, uts namespaces; its cgroup)

The runner prepares its private filesystem and waits; when the pool sends code it drops to an
unprivileged uid, applies rlimits and runs the snippet once, then exits. The zygote reaps it and
reports how it ended (a signal, `os._exit`), which the runner cannot report itself. When the runner
dies, the kernel kills everything left in its pid namespace.

The runner is forked straight into its pid namespace (the zygote unshares one for its next child,
then returns to its own), not through an intermediate process: on a 2-core host a second fork and
exit of a torch-sized process per run cost about a quarter of the sandbox's CPU.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import selectors
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from sandbox import isolation, wire
from sandbox.cgroup import CgroupFactory, RunCgroup

WORKDIR = "/tmp/run"
ZYGOTE_INITIAL_SEED: int | None = None
"""torch.initial_seed() in the zygote, taken before anything could draw from the generator."""


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


_HUGE_PAGE = 2 << 20
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


def _environment(cuda: bool) -> dict[str, Any]:
    import torch

    return {
        "torch_version": torch.__version__.split("+")[0],
        "device_kind": "cuda" if cuda else "cpu",
        "device_name": "" if cuda else _cpu_name(),
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
    }


def _warm_up_runner(cuda: bool) -> str:
    """First-op costs (kernels, allocator, CUDA context) paid in the prepared runner, before any code.

    Creating the Linear layer draws from torch's generator; `_seed_like_a_fresh_process` then
    gives the snippet the generator a fresh process would have.
    """
    import torch

    torch.set_num_threads(1)
    device = "cuda" if cuda else "cpu"
    x = torch.ones(4, 4, device=device)
    layer = torch.nn.Linear(4, 4, device=device)
    with torch.no_grad():
        with torch.autocast(device):
            layer(x).float().sum().item()
        (x @ x).half().float().sum().item()
    _seed_like_a_fresh_process()
    if cuda:
        torch.cuda.synchronize()
        return torch.cuda.get_device_name(0)
    return ""


# The seed torch's default generator started from before it seeded itself from the OS.
_CLASSIC_DEFAULT_SEED = 67280421310721


def _seed_like_a_fresh_process() -> None:
    """Every runner is a fork of one zygote, so all would draw the same "random" numbers. A fresh
    process of this torch seeds itself from the OS (each run differs) or, in older versions, from
    a fixed default seed (each run the same): do what it would do. Python's `random` reseeds
    itself after a fork; NumPy's global generator does not."""
    import torch

    if ZYGOTE_INITIAL_SEED == _CLASSIC_DEFAULT_SEED:
        torch.manual_seed(_CLASSIC_DEFAULT_SEED)
    else:
        torch.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _report_crash(sock: socket.socket, who: str, exc: BaseException) -> None:
    try:
        wire.send(sock, {"type": "crash", "message": f"sandbox {who} failed: {type(exc).__name__}: {exc}"})
    except BaseException:  # noqa: BLE001, S110 - the pool reads a closed socket as a crash too
        pass


def run_runner(config: dict[str, Any], sock: socket.socket, out_w: int, err_w: int, cgroups: CgroupFactory) -> None:
    """Body of the runner process; never returns."""
    try:
        os.setsid()
        # Dies with the zygote (and so with the server): set again after the uid changes below.
        isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        protections = ["fresh-process", "setsid", "closed-fds", "clean-environment"]
        if config["pid_namespace"]:
            protections.append("pid-namespace")
        cg = cgroups.create(config["cgroup_name"]) if cgroups.available else None
        if cg is not None:
            try:
                cg.add(os.getpid())  # read in our own pid namespace: this process
                protections += cg.features
                config = {**config, "cgroup": {k: str(v) for k, v in cg.dirs.items()}}
            except OSError:
                pass  # a cgroup we may not join: the run goes on without its caps, and says so
        wire.send(sock, {"type": "hello", "cgroup": config.get("cgroup")})
        protections += isolation.enter_namespaces()
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        sys.stdout.reconfigure(line_buffering=True)
        if "mount-namespace" in protections:
            protections = protections + isolation.private_filesystem(
                config["hide"], config["keep"], WORKDIR, config["tmp_bytes"]
            )
        else:
            os.makedirs(WORKDIR, exist_ok=True)
        uid = config["uid"] if os.geteuid() == 0 else os.geteuid()
        if os.geteuid() == 0:
            os.chown(WORKDIR, uid, uid)
        env = _environment(config["cuda"])
        device_name = _warm_up_runner(config["cuda"])
        if device_name:
            env["device_name"] = device_name
        # Applied when the code arrives (limits come with it), before any of it runs.
        protections += ["rlimits"] + (["unprivileged-uid"] if os.geteuid() == 0 else [])
        env["protections"] = protections
        wire.send(sock, {"type": "ready", "environment": env})
        request = wire.recv(sock)
        if request is None:
            os._exit(0)
        limits = request["limits"]
        cgroup = config.get("cgroup")
        if cgroup:
            RunCgroup.from_paths(cgroup).set_limits(limits["memory_bytes"], limits["processes"])
        isolation.apply_rlimits(
            cpu_s=limits["cpu_s"],
            file_bytes=limits["file_bytes"],
            open_files=limits["open_files"],
            # NPROC counts every process of the uid: meaningful only for our private per-run uid.
            processes=limits["processes"] if os.geteuid() == 0 else 1 << 20,
            memory_bytes=None if config["cuda"] else limits["memory_bytes"],
        )
        isolation.drop_privileges(uid)
        # Changing uid clears the parent-death signal: set it again, so a runner never outlives
        # the zygote (and so the server), whatever the snippet does.
        isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
        os.chdir(WORKDIR)
        os.environ.clear()
        os.environ.update(isolation.SAFE_ENV, HOME=WORKDIR, TMPDIR="/tmp")
        isolation.close_fds({sock.fileno()})
        from sandbox.execute import execute

        started = time.perf_counter()
        outcome = execute(request["code"], explain=request.get("explain", False))
        outcome["duration_ms"] = (time.perf_counter() - started) * 1000
        outcome["environment"] = env
        outcome["type"] = "result"
        wire.send(sock, outcome)
    except BaseException as exc:  # noqa: BLE001 - report, never fall back into the zygote's loop
        _report_crash(sock, "runner", exc)
    finally:
        os._exit(0)


def _exit_message(status: int, usage: Any) -> dict[str, Any]:
    cpu_s = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        return {"type": "exit", "signal": os.WTERMSIG(status), "code": None, "cpu_s": cpu_s}
    return {"type": "exit", "signal": None, "code": os.WEXITSTATUS(status), "cpu_s": cpu_s}


class Zygote:
    """The zygote's state: its control socket, and the report socket of each live runner."""

    def __init__(self, control: socket.socket, config: dict[str, Any], cgroups: CgroupFactory) -> None:
        self.control = control
        self.config = config
        self.cgroups = cgroups
        self.spawned = 0
        self.live: dict[int, socket.socket] = {}
        """Runner pid -> the zygote's copy of its report socket, for the exit message."""
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
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.spawned += 1
        config = {
            **self.config,
            # A uid of its own per run: its process cap counts only its own processes; it owns nothing.
            "uid": self.config["uid_base"] + self.spawned % 50000,
            "cgroup_name": f"ampquiz-run-{os.getpid()}-{self.spawned}-{os.urandom(4).hex()}",
            "pid_namespace": self.own_pid_ns is not None and isolation.new_pid_namespace_for_next_child(),
        }
        try:
            pid = os.fork()
        except OSError:
            self._back_to_own_pid_namespace(config)
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            parent_end.close()
            child_end.close()
            raise
        if pid == 0:
            self._close_in_child(parent_end, out_r, err_r)
            run_runner(config, child_end, out_w, err_w, self.cgroups)
        self._back_to_own_pid_namespace(config)
        self.live[pid] = child_end
        os.close(out_w)
        os.close(err_w)
        wire.send(self.control, {"type": "spawned", "pid": pid}, fds=[parent_end.fileno(), out_r, err_r])
        parent_end.close()
        os.close(out_r)
        os.close(err_r)

    def _back_to_own_pid_namespace(self, config: dict[str, Any]) -> None:
        if config["pid_namespace"]:
            assert self.own_pid_ns is not None
            # Cannot fail on a host that let us unshare; if it did, every later runner would be
            # forked into a dead namespace: better to stop and be restarted by the pool.
            try:
                isolation.enter_pid_namespace_for_children(self.own_pid_ns)
            except OSError:
                os._exit(70)

    def _close_in_child(self, parent_end: socket.socket, out_r: int, err_r: int) -> None:
        signal.set_wakeup_fd(-1)
        for fd in (self.wake_r, self.wake_w, out_r, err_r, *([self.own_pid_ns] if self.own_pid_ns is not None else [])):
            os.close(fd)
        for sock in (self.control, parent_end, *self.live.values()):
            sock.close()


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    config = json.loads(sys.argv[2])
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # ask NVML, not the CUDA runtime: keep forks clean
    import warnings

    with warnings.catch_warnings():  # import-time notices (e.g. no NumPy) are not any snippet's
        warnings.simplefilter("ignore")
        _warm_imports()
    import torch

    global ZYGOTE_INITIAL_SEED
    ZYGOTE_INITIAL_SEED = torch.initial_seed()
    # Every object so far (torch's ~280k) moves out of the collector's reach. Otherwise the first
    # full collection in a runner writes to each of them, copying the zygote's whole heap page by
    # page: about 170 ms of CPU in that run instead of 0.5 ms.
    gc.freeze()
    huge_page_bytes = _back_heap_with_huge_pages()
    config["cuda"] = bool(config.get("allow_cuda", True)) and torch.cuda.is_available()
    cgroups = CgroupFactory()
    cgroups.sweep()
    try:  # orphans (hosts without pid namespaces) are reparented here and reaped, never zombies
        isolation.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    except OSError:
        pass
    zygote = Zygote(control, config, cgroups)
    wire.send(
        control,
        {
            "type": "zygote",
            "environment": _environment(config["cuda"]),
            "cgroups": cgroups.available,
            "huge_page_bytes": huge_page_bytes,
        },
    )
    zygote.serve()


if __name__ == "__main__":
    main()
