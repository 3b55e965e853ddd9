"""Linux isolation for one run: namespaces, private mounts, an unprivileged uid, rlimits.

Every step is best-effort: a host that refuses one (an unprivileged container, say) keeps the
others, and the names of the protections that took effect are reported with each run, so nobody
believes in a wall that isn't there.

The runner's view of the disk is `sandbox.filesystem`'s; its syscall filter, `sandbox.seccomp`'s.

Runs in: the runner (namespaces, rlimits, the uid drop) and the zygote (the pid namespace
each runner is forked into); the server reads only `SAFE_ENV`, the environment it starts the
zygote with.
"""

from __future__ import annotations

import ctypes
import os
import resource
from pathlib import Path

# The process's own symbols, libc's among them: `find_library` would run `ldconfig -p` in a
# subprocess, in the zygote's start, before its torch import.
_libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_REMOUNT = 0x20

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1

# Entered by the runner itself; its pid namespace is made by the zygote (see below).
NAMESPACES = {
    "net-namespace": CLONE_NEWNET,
    "mount-namespace": CLONE_NEWNS,
    "ipc-namespace": CLONE_NEWIPC,
    "uts-namespace": CLONE_NEWUTS,
    # Entered after joining the run's cgroup: /proc/self/cgroup then names no host path.
    "cgroup-namespace": CLONE_NEWCGROUP,
}
HOSTNAME = b"sandbox"
"""The host's name is the host's business: a run's uts namespace answers this instead."""

# Environment a snippet sees: nothing of the server's (its secrets, its database URL).
SAFE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None
) -> None:
    enc = lambda s: s.encode() if s is not None else None
    _check(
        _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {target}",
    )


def prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), "prctl")


def enter_namespaces(*, mount_namespace: bool = True) -> list[str]:
    """Unshare what the host allows, one namespace at a time; returns the names that took effect.
    `mount_namespace` False leaves the mount namespace to the caller (`sandbox.root_template`).

    Called in the runner, during set-up, while it is still root.
    """
    active = []
    for name, flag in NAMESPACES.items():
        if name == "mount-namespace" and not mount_namespace:
            continue
        try:
            unshare(flag)
            active.append(name)
        except OSError:
            pass
    if "uts-namespace" in active:
        _libc.sethostname(HOSTNAME, len(HOSTNAME))
    if "mount-namespace" in active:
        try:  # keep our mounts from propagating back to the host
            mount(None, "/", None, MS_REC | MS_PRIVATE)
        except OSError:
            active.remove("mount-namespace")
    return active


def leave_host_network() -> bool:
    """A network namespace of this process's own (a loopback that is down, nothing else), where
    the host allows one; whether it took effect."""
    try:
        unshare(CLONE_NEWNET)
    except OSError:
        return False
    return True


def enter_mount_namespace() -> list[str]:
    """A mount namespace of this process's own, copied from the one it is in, with nothing it
    mounts propagating back; returns ["mount-namespace"], or [] where the host refuses."""
    try:
        unshare(CLONE_NEWNS)
    except OSError:
        return []
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError:
        return []
    return ["mount-namespace"]


def set_namespace(fd: int, kind: int) -> None:
    _check(_libc.setns(fd, kind), "setns")


# A pid namespace cannot be entered by the process that makes it: `unshare` makes it the one its
# *next child* is born into, as that namespace's pid 1. The zygote does this for each runner, then
# returns to its own namespace so that the next unshare is allowed.


def open_own_pid_namespace() -> int | None:
    """A handle on this process's pid namespace, where the host lets us make new ones."""
    try:
        fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        unshare(CLONE_NEWPID)
        enter_pid_namespace_for_children(fd)
    except OSError:
        os.close(fd)
        return None
    return fd


def new_pid_namespace_for_next_child() -> bool:
    try:
        unshare(CLONE_NEWPID)
    except OSError:
        return False
    return True


def enter_pid_namespace_for_children(fd: int) -> None:
    set_namespace(fd, CLONE_NEWPID)


_CAP_SYS_NICE = 23


def may_lower_nice(to: int) -> bool:
    """Whether this process (and a runner forked from it, while it is still root) may set its nice
    value back down to `to` once raised: with CAP_SYS_NICE, or an RLIMIT_NICE that allows it.
    Raising it needs no privilege; lowering it does, so a zygote that could not lower it again
    leaves it alone rather than hand its runs a lower priority than the server's."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:") and int(line.split()[1], 16) >> _CAP_SYS_NICE & 1:
                return True
        soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    except (OSError, ValueError):
        return False
    return soft == resource.RLIM_INFINITY or soft >= 20 - to


def drop_privileges(uid: int) -> bool:
    """Become an unprivileged uid with no groups; as a non-root user there is nothing to drop."""
    try:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError:
        pass
    if os.geteuid() != 0:
        return False
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    return True


def no_core_dumps() -> None:
    """The core-dump limit of this process and all it starts: 1, not 0. A core_pattern that pipes
    to a handler ignores a limit of 0 and gets the whole memory image (the handler runs as host
    root, outside every namespace), and a program a run execs is dumpable again whatever prctl
    allowed; the kernel reads a limit of exactly 1 as "no dump" for a pipe, and 1 byte is too
    small for a core file. The syscall filter then refuses setting it (lowered to 0, it dumps)."""
    resource.setrlimit(resource.RLIMIT_CORE, (1, 1))


def apply_rlimits(
    *,
    cpu_s: int,
    file_bytes: int,
    open_files: int,
    processes: int,
    memory_bytes: int | None,
    vm_bytes: int,
) -> None:
    """Lower this process's limits (an unprivileged process may lower, never raise, them)."""

    def cap(which: int, value: int) -> None:
        _, hard = resource.getrlimit(which)
        # CPU: SIGXCPU at the soft limit (reported as a CPU timeout), SIGKILL a second later.
        want = value + 1 if which == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:  # never above the hard limit: only root may raise it
            value, want = min(value, hard), min(want, hard)
        resource.setrlimit(which, (value, want))

    cap(resource.RLIMIT_CPU, cpu_s)
    cap(resource.RLIMIT_FSIZE, file_bytes)
    cap(resource.RLIMIT_NOFILE, open_files)
    cap(resource.RLIMIT_NPROC, processes)
    if memory_bytes is not None:
        # The forked image already maps torch; the cap is what the snippet may add on top of it.
        cap(resource.RLIMIT_AS, vm_bytes + memory_bytes)


def current_vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def open_fds() -> set[int]:
    try:
        return {int(n) for n in os.listdir("/proc/self/fd")}
    except OSError:
        return set(range(3, 1024))


def threads_held() -> int:
    """This process's threads (a CUDA runner holds the driver's besides its own)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


_SYS_CLOSE_RANGE = 436
"""close_range(2)'s number, the same on x86_64 and aarch64 (Linux 5.9+)."""


def close_fds(keep: set[int]) -> None:
    """Closes every descriptor above 2 but `keep`: one close_range(2) per gap between them, not
    one close() per entry of /proc/self/fd, whose listing cost a runner ~0.3 ms on each run.
    Where the kernel has no close_range, by the listing."""
    low = 3
    for fd in [*sorted(k for k in keep if k >= low), 0xFFFFFFFF + 1]:  # the last gap: to the top
        if (
            fd > low
            and _libc.syscall(
                ctypes.c_long(_SYS_CLOSE_RANGE),
                ctypes.c_uint(low),
                ctypes.c_uint(fd - 1),
                ctypes.c_uint(0),
            )
            != 0
        ):
            for open_fd in sorted(open_fds()):
                if open_fd > 2 and open_fd not in keep:
                    try:
                        os.close(open_fd)
                    except OSError:
                        pass
            return
        low = fd + 1
