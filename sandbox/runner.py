"""The runner: the body of one forked process that prepares itself, runs one snippet, and exits.

Runs in: the runner (a fork of the zygote: the zygote imports this module, but its code runs
only in the child, from `Zygote.spawn`). The runner joins its cgroup, enters its namespaces and
its allow-listed root, warms up torch (first-op costs paid before any code arrives), drops to an
unprivileged uid, closes every other descriptor, loads its syscall filter and says it is ready;
when the pool sends code it lowers its rlimits and runs the snippet once with `sandbox.execute`,
reports, then exits with the code of the status it reported (`sandbox.ending`). It never returns
into the zygote's loop.
"""

from __future__ import annotations

import io
import os
import platform
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any, cast

from sandbox import filesystem, fresh_main, isolation, root_template, seccomp, wire
from sandbox.cgroup import CgroupFactory
from sandbox.claims import CRASH_PREFIX
from sandbox.ending import CRASH_EXIT, EXIT_CODES

WORKDIR = "/tmp/run"
"""The runner's private working folder (a tmpfs where it has a mount namespace)."""

# The seed torch's default generator started from before it seeded itself from the OS.
_CLASSIC_DEFAULT_SEED = 67280421310721
ZYGOTE_INITIAL_SEED: int | None = None
"""torch.initial_seed() in the zygote, taken before anything could draw from the generator; set
by `remember_zygote_seed` in the zygote, so every runner forked from it inherits it."""


def remember_zygote_seed() -> None:
    """Called by the zygote once torch is imported, before it forks any runner."""
    import torch

    global ZYGOTE_INITIAL_SEED
    ZYGOTE_INITIAL_SEED = torch.initial_seed()


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_environment(cuda: bool, gpu_name: str = "") -> dict[str, Any]:
    import torch

    return {
        "torch_version": torch.__version__.split("+")[0],
        "device_kind": "cuda" if cuda else "cpu",
        "device_name": gpu_name if cuda else _cpu_name(),
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
    }


MAX_TORCH_THREADS = 8
"""The most threads a run's torch computes with, whatever its limits say (`Limits.torch_threads`)."""


def _compute_on(threads: object) -> bool:
    """Has torch compute on `threads` threads (`Limits.torch_threads`; a prepared runner computes
    on one), starting them now, before the snippet's limits are set: started by the snippet's first
    large op, they counted against its processes and memory, and where none was left libgomp
    ended the process. Returns whether it started any."""
    wanted = max(1, min(int(threads), MAX_TORCH_THREADS)) if isinstance(threads, int | float) else 1
    if wanted == 1:
        return False
    import torch

    torch.set_num_threads(wanted)
    torch.ones(1 << 17).sum()  # above torch's grain size: the parallel region starts the threads
    return True


def warm_up_first_ops(device: str) -> None:
    """The ops most snippets start with (a Linear layer under autocast, a matmul, half casts).

    The first time in a process this pays torch's first-op costs (kernel registration, the
    allocator, autocast's paths; on CUDA the context): in the zygote, once, on a CPU host; in each
    runner on a CUDA host. Run again in a runner forked from a warmed zygote it costs a fraction of
    that and still earns its keep: it makes the runner's private copies of the memory pages these
    ops write (reference counts, allocator state), which the snippet would otherwise copy on its
    own clock -- a few hundred page faults, about 1.5 ms of a run's latency.

    Creating the Linear layer draws from torch's generator; `_seed_like_a_fresh_process` then
    gives each snippet the generator a fresh process would have.
    """
    import torch

    torch.set_num_threads(1)
    x = torch.ones(4, 4, device=device)
    layer = torch.nn.Linear(4, 4, device=device)
    with torch.no_grad():
        with torch.autocast(device):
            layer(x).float().sum().item()
        (x @ x).half().float().sum().item()


def _warm_up_runner(cuda: bool) -> str:
    """The runner's share of the warm-up (all of it on a CUDA host: the zygote must never touch
    CUDA, or no child of it could use it), then the reseeding."""
    warm_up_first_ops("cuda" if cuda else "cpu")
    _seed_like_a_fresh_process(cuda)
    if cuda:
        import torch

        torch.cuda.synchronize()
        return torch.cuda.get_device_name(0)
    return ""


def _seed_like_a_fresh_process(cuda: bool) -> None:
    """Every runner is a fork of one zygote, so all would draw the same "random" numbers. A fresh
    process of this torch seeds itself from the OS (each run differs) or, in older versions, from
    a fixed default seed (each run the same): do what it would do. Python's `random` reseeds
    itself after a fork; NumPy's global generator does not.

    On a CPU host only the CPU generator exists for a snippet, and it is reseeded directly:
    `torch.seed()` would also queue a seeding of each accelerator's generators for when they start
    (they never do here), recording a formatted stack for each -- about 2.5 ms and 450 page faults
    per run, for nothing a snippet could see. On a CUDA host, where the runner has started CUDA,
    `torch.seed()` seeds its generators too.
    """
    import torch

    classic = ZYGOTE_INITIAL_SEED == _CLASSIC_DEFAULT_SEED
    if cuda and classic:
        torch.manual_seed(_CLASSIC_DEFAULT_SEED)
    elif cuda:
        torch.seed()
    elif classic:
        torch.default_generator.manual_seed(_CLASSIC_DEFAULT_SEED)
    else:
        torch.default_generator.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        # NumPy's global generator as a fresh process leaves it: its 624 words from the OS, the
        # first set to 0x80000000, at position 623. `numpy.random.seed()` does the same from 128
        # bits hashed into 624 words: 0.6 ms and 120 page faults in a runner, against 0.4 and 70.
        key = numpy.frombuffer(os.urandom(2496), dtype=numpy.uint32).copy()
        key[0] = 0x80000000
        numpy.random.set_state(("MT19937", key, 623, 0, 0.0))


def _report_crash(sock: socket.socket, exc: BaseException) -> None:
    try:
        wire.send(sock, {"type": "crash", "message": f"{CRASH_PREFIX}{type(exc).__name__}: {exc}"})
    except BaseException:  # noqa: BLE001, S110 - the pool reads a closed socket as a crash too
        pass


def _prepare(
    config: dict[str, Any], sock: socket.socket, out_w: int, err_w: int, cgroups: CgroupFactory
) -> tuple[dict[str, Any], int]:
    """Everything but the snippet, before any code arrives: off the learner's clock, and done
    while nothing untrusted has run yet. Returns the environment the runner reports as ready, and
    the descriptor numbers the GPU driver holds (0 on a CPU host)."""
    os.setsid()
    # Dies with the zygote (and so with the server): set again after the uid changes below.
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(
        signal.SIGINT, signal.default_int_handler
    )  # the zygote ignores it; a fresh process does not
    protections = ["fresh-process", "setsid", "closed-fds", "clean-environment"]
    if config["pid_namespace"]:
        protections.append("pid-namespace")
    # Joined in our own pid namespace: the pid written is this process's as seen there. A cgroup
    # we may not join: the run goes on without its caps, and says so.
    cgroup_dirs = cgroups.join(config["cgroup_name"]) if cgroups.available else None
    if cgroup_dirs:
        protections += cgroups.features
    # The pool writes the caps (it is root, and this process will not be by the time code comes).
    wire.send(sock, {"type": "hello", "cgroup": cgroup_dirs})
    template = config.get("root_template")
    # With a root template the mount namespace comes from it (a copy of the template's).
    protections += isolation.enter_namespaces(mount_namespace=template is None)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    # The interpreter's own stdout, a TextIOWrapper (typeshed says only TextIO).
    cast(io.TextIOWrapper, sys.stdout).reconfigure(line_buffering=True)
    uid = config["uid"] if os.geteuid() == 0 else os.geteuid()
    if template is not None:
        try:
            protections += root_template.enter(template, uid=uid, tmp_bytes=config["tmp_bytes"])
        except OSError:  # not entered (the host refused setns): build this run's root as below
            template = None
            protections += isolation.enter_mount_namespace()
    if template is None and "mount-namespace" in protections:
        try:
            protections += filesystem.allow_listed_root(
                config["keep"],
                config["hide"],
                uid=uid,
                tmp_bytes=config["tmp_bytes"],
                cuda=config["cuda"],
            )
        except OSError:  # no new root here: the host's tree, read-only, with a deny-list covered
            protections += filesystem.deny_listed(
                config["hide"], config["keep"], config["tmp_bytes"], cuda=config["cuda"]
            )
    os.makedirs(WORKDIR, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(WORKDIR, uid, uid)
    env = dict(config["environment"])  # described once by the zygote
    if not config["cuda"]:
        _warm_up_runner(cuda=False)  # at the zygote's higher nice value: it yields to runs
    # Forked at the zygote's higher nice value; back to the server's while still root (the zygote
    # raised it only where that is allowed), so the snippet runs at the priority any process would.
    if os.getpriority(os.PRIO_PROCESS, 0) != config["run_nice"]:
        os.setpriority(os.PRIO_PROCESS, 0, config["run_nice"])
    if isolation.drop_privileges(uid):
        protections.append("unprivileged-uid")
    driver_fds: set[int] = set()
    if config["cuda"]:
        # CUDA starts as the run's uid, never as root: the driver remembers the privilege of the
        # process that opened its control device, and the snippet inherits that session. What
        # starting it opened stays open (the driver's descriptors on /dev/nvidia*, its pipes and
        # events): closed, the context is dead (on an H200 the snippet's first op failed with
        # "unspecified launch failure"). Nothing else the runner holds reaches the snippet.
        before = isolation.open_fds()
        env["device_name"] = _warm_up_runner(cuda=True) or env["device_name"]
        driver_fds = isolation.open_fds() - before
    # Changing uid clears the parent-death signal: set it again, so a runner never outlives
    # the zygote (and so the server), whatever the snippet does.
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
    os.chdir(WORKDIR)
    os.environ.clear()
    os.environ.update(isolation.SAFE_ENV, HOME=WORKDIR, TMPDIR="/tmp")
    isolation.close_fds({sock.fileno(), *driver_fds})
    # The zygote made this socket, in the host's network namespace: with no address, a snippet
    # could bind it to a name of its choosing among the host's abstract Unix sockets (one a host
    # service is about to take). An address the kernel picks can never be changed.
    sock.bind("")
    isolation.no_core_dumps()  # before the filter, which refuses setting that limit
    # Last: none of the steps above is allowed once it is in, and nothing after needs them.
    if seccomp.PROGRAMS is not None:
        seccomp.install(seccomp.PROGRAMS)
        protections.append("syscall-filter")
    protections.append("rlimits")  # applied when the code arrives: the limits come with it
    env["protections"] = protections
    # RLIMIT_NOFILE caps descriptor numbers: the snippet's share starts above the driver's.
    return env, max(driver_fds) + 1 if driver_fds else 0


def run_runner(
    config: dict[str, Any], sock: socket.socket, out_w: int, err_w: int, cgroups: CgroupFactory
) -> None:
    """Body of the runner process; never returns. Its exit code follows `sandbox.ending`."""
    code = CRASH_EXIT
    try:
        env, fds_held = _prepare(config, sock, out_w, err_w, cgroups)
        # The snippet's `__main__`, made while the runner waits: it writes to the interpreter's
        # own tables (sys.modules, sys.path), pages the zygote's heap shares on 2 MiB pages, which
        # a write copies whole: made when the code arrived, each run waited for those copies.
        namespace = fresh_main.main_module()
        vm_bytes = isolation.current_vm_bytes()
        wire.send(sock, {"type": "ready", "environment": env})
        request = wire.recv(sock)
        if request is None:
            os._exit(0)
        limits = request["limits"]
        if _compute_on(limits.get("torch_threads", 1)):
            vm_bytes = (
                isolation.current_vm_bytes()
            )  # the threads' stacks are not the snippet's to pay for
        isolation.apply_rlimits(
            cpu_s=limits["cpu_s"],
            file_bytes=limits["file_bytes"],
            open_files=limits["open_files"] + fds_held,
            # NPROC counts every process and thread of the uid: meaningful only for our private
            # per-run uid. The snippet's share comes on top of the threads the runner holds (one
            # on a CPU host; on a CUDA host the driver's too).
            processes=limits["processes"] + isolation.threads_held() - 1
            if "unprivileged-uid" in env["protections"]
            else 1 << 20,
            memory_bytes=None if config["cuda"] else limits["memory_bytes"],
            vm_bytes=vm_bytes,
        )
        from sandbox.execute import execute

        started = time.perf_counter()
        outcome = execute(
            request["code"], explain=request.get("explain", False), namespace=namespace
        )
        outcome["duration_ms"] = (time.perf_counter() - started) * 1000
        outcome["type"] = "result"
        code = EXIT_CODES.get(outcome["status"], CRASH_EXIT)
        wire.send(sock, outcome)
    except BaseException as exc:  # noqa: BLE001 - report, never fall back into the zygote's loop
        code = CRASH_EXIT
        _report_crash(sock, exc)
    finally:
        os._exit(code)
