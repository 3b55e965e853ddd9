"""What a runner sees of the disk: an allow-listed root, a minimal /dev, private temp folders.

The runner builds a new root on an empty tmpfs and binds into it, read-only, only what a run needs:
the interpreter and the packages it imports (`allowed`, from the pool), system libraries and a few
system files. Everything else -- the server's working tree, its bank and records wherever they
live, its database, other checkouts, home folders, service sockets under /run -- simply is not
there. It then `pivot_root`s into it and lets go of the host's tree entirely.

    /usr/{bin,lib,lib64,...}, /bin, /lib...   system programs and libraries (read-only)
    <sys.prefix>, <site-packages>, sandbox/   the interpreter and packages (read-only)
    /etc        generated: passwd and group with this run's uid, hosts, nsswitch.conf;
                bound: ld.so.cache, localtime
    /dev        tmpfs: null, zero, full, random, urandom, shm/, fd and std* links; on a CUDA host
                the /dev/nvidia* devices. No fuse, no block devices, no ptys.
    /proc       a fresh proc of the run's own pid namespace
    /sys        on a CPU host, copies of what devices/system/{cpu,node} say of the CPUs and
                memory nodes (what torch and libc read), none of the host's live counters
                (`sandbox.static_sys`); more on a CUDA host, where NVML reads the PCI tree
                (live). Never /sys/fs/cgroup.
    /tmp, /var/tmp, /dev/shm   private tmpfs, `tmp_bytes` each

Where the host refuses the new root (no mount namespace), `deny_listed` is the fallback: the host's
tree read-only with secrets and service folders covered by empty tmpfs (the earlier design).

Runs in: the runner, while it is still root, in its own mount namespace.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat

from sandbox.isolation import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    mount,
)
from sandbox.static_sys import SYS_SYSTEM, static_sys

MNT_DETACH = 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_libc = ctypes.CDLL(None, use_errno=True)

SYSTEM_DIRS = (
    "/usr/bin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/libx32",
    "/usr/share/zoneinfo",
)
TOP_LEVEL = ("/bin", "/lib", "/lib64", "/lib32", "/libx32")
"""Links into /usr on a merged-/usr host (recreated as links), directories elsewhere (bound)."""
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")
SYS_CUDA = ("/sys/bus", "/sys/devices", "/sys/class", "/sys/module")
DEV_NODES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}

TMP_INODES = 16_384
"""Files a run's /tmp, /var/tmp and /dev/shm may each hold. Their size caps the bytes, not the
count: a run made 150,000 empty files, whose teardown after its result then took seconds of the
host's CPU and outlasted the cleanup's wait for its cgroup (left behind, one a run)."""


def mount_proc(target: str, flags: int, *, pids_only: bool) -> list[str]:
    """A fresh proc at `target` showing processes only (`subset=pid`, Linux 5.8+): its own pid
    namespace's, and none of the host-wide files beside them. Those are the host's, whatever the
    namespace: /proc/loadavg, stat, meminfo, vmstat, diskstats, interrupts, pressure/ and
    sys/kernel/random/boot_id told a run how busy the host and its disk were, and so what other
    runs were doing. /proc/self (its fds, status, maps, mountinfo, net) is still there. A kernel
    that does not know the option gets the whole proc, and the protection is not claimed; so does
    a CUDA runner (`pids_only` False): the driver and NVML read /proc/driver/nvidia when CUDA
    starts, and that has not been tried on a GPU with the subset.
    Returns the protections in force; OSError where no proc could be mounted at all."""
    if pids_only:
        try:
            mount("proc", target, "proc", flags, "subset=pid")
            return ["private-proc", "proc-pids-only"]
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    mount("proc", target, "proc", flags)
    return ["private-proc"]


def tmp_options(tmp_bytes: int) -> str:
    """A run's own tmpfs's mount options."""
    return f"size={tmp_bytes},nr_inodes={TMP_INODES},mode=1777"


_BASE = "/tmp"
"""Where the new root is assembled before the pivot: every host has it, and this mount namespace's
copy of it is ours to cover. Sources under it are reached through handles opened beforehand."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unmount(path: str) -> None:
    _check(_libc.umount2(path.encode(), 0), f"umount {path}")


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def outermost(folders: set[str]) -> list[str]:
    """The resolved `folders` none of the others holds, sorted: binding a folder brings along
    what is inside it."""
    found = sorted(folders)
    return [p for i, p in enumerate(found) if not any(_within(p, q) for q in found[:i])]


def bind_read_only(fd: int, target: str, *, rec: bool = True) -> None:
    """The folder (or file) behind the handle `fd`, bound at `target` read-only (with what is
    mounted inside it when `rec`)."""
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | (MS_REC if rec else 0))
    mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def etc_files(uid: int) -> dict[str, str]:
    return {
        "passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{uid}:sandbox:/tmp/run:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nsandbox:x:{uid}:\n",
        "hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
    }


def allow_listed_root(
    allowed: list[str], hide: list[str], *, uid: int, tmp_bytes: int, cuda: bool
) -> list[str]:
    """Build the run's root and pivot into it; returns the protections that took effect.

    Raises OSError, with nothing of the host's view changed, when the root cannot be built at all.
    """
    return build_and_pivot(allowed, hide, uid=uid, tmp_bytes=tmp_bytes, cuda=cuda)


def build_and_pivot(
    allowed: list[str], hide: list[str], *, uid: int | None, tmp_bytes: int, cuda: bool
) -> list[str]:
    """The root, built on a tmpfs at _BASE and pivoted into: a run's (`uid`), or with `uid` None
    the template every run copies (`sandbox.root_template`), without what each run mounts itself."""
    sources = outermost(
        {os.path.realpath(p) for p in [*SYSTEM_DIRS, *allowed] if os.path.exists(p)} - {"/"}
    )
    links = {p: os.readlink(p) for p in TOP_LEVEL if os.path.islink(p)}
    files = [p for p in SYSTEM_FILES if os.path.exists(p) and not os.path.islink(p)]
    links |= {p: os.readlink(p) for p in SYSTEM_FILES if os.path.islink(p)}
    sources += [p for p in TOP_LEVEL if p not in links and os.path.isdir(p)]
    sys_dirs = (
        [p for p in SYS_CUDA if os.path.isdir(p)] if cuda else []
    )  # a CPU host's: copies (`static_sys`)
    dev = [n for n in DEV_NODES if os.path.exists(f"/dev/{n}")]
    if cuda:
        dev += sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    handles: dict[str, int] = {}
    for path in ["/proc", *sources, *files, *sys_dirs, *(f"/dev/{n}" for n in dev), *hide]:
        try:
            handles[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            pass
    try:
        mount("tmpfs", _BASE, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    except OSError:
        for fd in handles.values():
            os.close(fd)
        raise
    try:
        done = _populate(
            _BASE, handles, sources, files, links, sys_dirs, dev, hide, uid, tmp_bytes, cuda
        )
        os.chdir(_BASE)
        _check(
            _libc.syscall(ctypes.c_long(_SYS_PIVOT_ROOT[platform.machine()]), b".", b"."),
            "pivot_root",
        )
    except (OSError, KeyError):
        os.chdir("/")
        _libc.umount2(_BASE.encode(), MNT_DETACH)
        raise
    finally:
        for fd in handles.values():
            os.close(fd)
    # The host's root is now stacked on ours at "/": let go of it, and of every mount below it.
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    mount(None, "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    return [*done, "allow-listed-filesystem", "hidden-paths", "read-only-root"]


def _populate(
    base: str,
    handles: dict[str, int],
    sources: list[str],
    files: list[str],
    links: dict[str, str],
    sys_dirs: list[str],
    dev: list[str],
    hide: list[str],
    uid: int | None,
    tmp_bytes: int,
    cuda: bool,
) -> list[str]:
    """Fills the new root under `base`. With `uid` None it is a template's (`sandbox.root_template`):
    no fresh proc, temp folders or /etc yet, only the folders each run mounts its own on."""
    done = []
    os.makedirs(base + "/proc")
    if uid is not None:
        try:
            done += mount_proc(base + "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, pids_only=not cuda)
        except OSError:  # a host that refuses a fresh proc: its own, as without the new root
            mount(f"/proc/self/fd/{handles['/proc']}", base + "/proc", None, MS_BIND | MS_REC)
    for tmp in ("/tmp", "/var/tmp"):  # first: kept paths under /tmp are bound on top of these
        os.makedirs(base + tmp)
        if uid is not None:
            mount("tmpfs", base + tmp, "tmpfs", MS_NOSUID | MS_NODEV, tmp_options(tmp_bytes))
    if not cuda:
        static_sys(base + SYS_SYSTEM)
    for path in [*sources, *sys_dirs]:
        if path in handles:
            os.makedirs(base + path, exist_ok=True)
            try:
                bind_read_only(handles[path], base + path)
            except OSError:
                os.rmdir(base + path)  # a folder the host will not share: absent, not empty
    for path in files:
        if path in handles and (uid is not None or not path.startswith("/etc/")):
            os.makedirs(os.path.dirname(base + path), exist_ok=True)
            open(base + path, "x").close()
            bind_read_only(handles[path], base + path, rec=False)
    for path, target in links.items():
        if uid is not None or not path.startswith("/etc/"):
            os.makedirs(os.path.dirname(base + path), exist_ok=True)
            os.symlink(target, base + path)
    os.makedirs(base + "/etc", exist_ok=True)
    for name, text in etc_files(uid).items() if uid is not None else ():
        with open(f"{base}/etc/{name}", "w") as f:
            f.write(text)
    if _minimal_dev(base + "/dev", handles, dev, tmp_bytes if uid is not None else None):
        done.append("minimal-dev")
    if uid is not None:
        done.append("private-tmp")
    for path in hide:  # a hidden path inside an allowed one (the allow-list hides all others)
        if path in handles and any(_within(path, s) and path != s for s in sources):
            if stat.S_ISDIR(os.fstat(handles[path]).st_mode):
                mount("tmpfs", base + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k")
            else:
                mount("/dev/null", base + path, None, MS_BIND)
    return done


def _minimal_dev(
    target: str, handles: dict[str, int], dev: list[str], tmp_bytes: int | None
) -> bool:
    """/dev with only harmless devices; its shm/ is a run's own tmpfs (`tmp_bytes` None: later)."""
    os.makedirs(target)
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name in dev:
        fd = handles.get(f"/dev/{name}")
        if fd is None:
            continue
        if stat.S_ISDIR(os.fstat(fd).st_mode):  # /dev/nvidia-caps
            os.makedirs(f"{target}/{name}")
        else:
            open(f"{target}/{name}", "x").close()
        mount(f"/proc/self/fd/{fd}", f"{target}/{name}", None, MS_BIND | MS_REC)
    for name, to in DEV_LINKS.items():
        os.symlink(to, f"{target}/{name}")
    os.makedirs(f"{target}/shm")
    if tmp_bytes is not None:
        mount(
            "tmpfs",
            f"{target}/shm",
            "tmpfs",
            MS_NOSUID | MS_NODEV | MS_NOEXEC,
            tmp_options(tmp_bytes),
        )
    return all(f"/dev/{n}" in handles for n in DEV_NODES)


# ---- the fallback: the host's tree, read-only, with a deny-list covered ------------------------

# Where hosts keep Unix sockets (a database's, a broker's), state and logs. A network namespace
# does not cover Unix sockets, which are files, and connecting to one works even on a read-only
# mount: so these get an empty tmpfs each.
SERVICE_DIRS = (
    "/run",
    "/var/run",
    "/var/lib",
    "/var/log",
    "/var/spool",
    "/var/mail",
    "/var/cache",
    "/var/backups",
)


def _cover_keeping(path: str, keep: list[str], options: str) -> None:
    """Mount an empty tmpfs over `path`, re-exposing read-only the `keep` paths below it, opened
    before the cover goes on and bound back through those handles."""
    inside = [k for k in keep if _within(k, path)]
    fds = []
    for k in inside:
        try:
            fds.append((k, os.open(k, os.O_PATH)))
        except OSError:
            pass
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
    for k, fd in fds:
        os.makedirs(k, exist_ok=True)
        bind_read_only(fd, k)
        os.close(fd)


def deny_listed(hide: list[str], keep: list[str], tmp_bytes: int, *, cuda: bool) -> list[str]:
    """Fresh /proc, private tmp dirs, hidden secrets and service sockets, the rest read-only."""
    done = []
    try:
        done += mount_proc("/proc", MS_NOSUID | MS_NODEV, pids_only=not cuda)
    except OSError:
        pass
    for tmp in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            try:
                _cover_keeping(tmp, keep, tmp_options(tmp_bytes))
            except OSError:
                continue
    done.append("private-tmp")
    covered = 0
    for path in [*SERVICE_DIRS, *hide]:
        try:
            if os.path.islink(path):
                continue  # /var/run -> /run: covered through its target
            if os.path.isdir(path):
                _cover_keeping(path, keep, "size=64k,mode=755")
            elif os.path.exists(path):
                mount("/dev/null", path, None, MS_BIND)
            covered += 1
        except OSError:
            pass
    if covered:
        done.append("hidden-paths")
    try:  # per-mount flag of this namespace's copy of "/": the host's stays writable
        mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        done.append("read-only-root")
    except OSError:
        pass
    return done
