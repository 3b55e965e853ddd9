"""The syscall filters for every runner: deny by default, and some calls refused by their arguments.

Two filters, both loaded into every runner (the kernel runs each call past both, and the stricter
answer stands):

1. **The allow-list** (`ALLOWED`; it and the refusals' lists are in `sandbox.syscall_lists`): the
   calls a Python process running torch makes, on the CPU or a GPU, and nothing else. Any other
   call fails with ENOSYS, as on a kernel that lacks it (libc and Python then fall back where they
   can, as they would there). The list follows the calls container runtimes allow an unprivileged
   container by default, less what a snippet never needs: SysV message queues and POSIX mqueues,
   `sync`/`syncfs` (flushing every file system of the host), `personality`, Landlock, fanotify,
   `name_to_handle_at`, `unshare`, and the calls below.
2. **The refusals** (`REFUSED` and the argument rules of `_refusals`), with EPERM, which also
   names what the allow-list leaves out and what an attacker wants most, so each stays refused
   should the list ever grow:

- new namespaces (user namespaces above all: they hand a process every capability inside them):
  `unshare` and `clone` with any CLONE_NEW* flag, `setns`; `clone3` fails with ENOSYS, because its
  flags sit in memory a filter cannot read, and libc then falls back to `clone` (threads, fork,
  subprocess keep working);
- every mount-family call (so no FUSE mount a snippet serves itself), `chroot`;
- kernel keyrings (they outlive the process and were read by later runs), io_uring, userfaultfd,
  bpf, perf events, ptrace and the calls like it, module and kexec calls, the kernel log;
- sockets of any family but Unix, IPv4 and IPv6 (AF_VSOCK reached the host; netlink, packet, alg),
  and IP sockets of any type but stream and datagram, or any protocol but TCP and UDP;
- native AIO, inotify and fcntl's directory notifications and leases (host-wide budgets and a view
  of other runs' file activity); reads past the page cache (O_DIRECT), read-ahead hints and disk
  flushes (`fsync` and its kin succeed and do nothing: a run writes only to memory), the prctl
  options that would let a run outlive the server or dump its memory to the host, and setting the
  core-dump limit (for the same reason).

They are compiled once in the zygote by the system's libseccomp (a thin ctypes binding: no
compiled dependency) and exported as BPF programs; a runner loads them with two seccomp(2) calls,
at the end of its preparation, so a run pays nothing for them. Where libseccomp is missing the
runs go on without a filter, and the protections list says so (no "syscall-filter").

Runs in: the zygote (`prepare`, once) and the runner (`install`, before it says ready).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Callable

from sandbox.syscall_lists import (
    ALLOWED,
    ALLOWED_IP_PROTOCOLS,
    ALLOWED_IP_SOCKET_TYPES,
    ALLOWED_SOCKET_FAMILIES,
    F_SETFL,
    MS_SYNC,
    POSIX_FADV_DONTNEED,
    READ_AHEAD_HINTS,
    REFUSED,
    REFUSED_FCNTL,
    REFUSED_IOCTL_RANGES,
    REFUSED_PRCTL,
    RLIMIT_CORE,
    RWF_NOWAIT,
)

# libseccomp's actions and attributes (seccomp.h).
_ACT_ALLOW = 0x7FFF0000


def _act_errno(err: int) -> int:
    return 0x00050000 | (err & 0xFFFF)


_ATTR_ACT_BADARCH = 2
_ATTR_CTL_OPTIMIZE = 8
_CMP_NE = 1
_CMP_GT = 6
_CMP_EQ = 4
_CMP_GE = 5
_CMP_MASKED_EQ = 7

_CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
_CLONE_NEWTIME = 0x00000080  # unshare only: in clone()'s flags these bits are the exit signal

_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}

PROGRAMS: tuple[bytes, ...] | None = None
"""The compiled filters, set in the zygote by `prepare`; every runner forked after inherits them."""
_LOADABLE: list[tuple[ctypes.Array, ctypes.Structure]] = []
"""PROGRAMS as the kernel takes them (a buffer and the sock_fprog pointing at it), built once too."""
_libc = ctypes.CDLL(None, use_errno=True)
PROBLEM = ""
"""Why there is no filter, when there is none."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("a", ctypes.c_uint64),
        ("b", ctypes.c_uint64),
    ]


def _load_library() -> ctypes.CDLL:
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)
    ]  # fmt: skip
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def compile_filters() -> tuple[bytes, bytes]:
    """The allow-list and the refusals (see above), as BPF programs (struct sock_filter[]) for
    this machine's architecture, in the order a runner loads them: when both refuse a call, the
    one loaded last says with what (EPERM, not the allow-list's ENOSYS).

    Syscalls of another ABI (32-bit `int 0x80`, x32) fail with EPERM: the filters name only the
    native one, so a snippet cannot reach a refused call through a different syscall table.
    """
    lib = _load_library()
    return _compile(lib, _act_errno(errno.ENOSYS), _allow_list), _compile(
        lib, _ACT_ALLOW, _refusals
    )


Rule = Callable[..., None]


def _compile(lib: ctypes.CDLL, default: int, rules: Callable[[Rule], None]) -> bytes:
    ctx = lib.seccomp_init(default)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        lib.seccomp_attr_set(ctx, _ATTR_ACT_BADARCH, _act_errno(errno.EPERM))
        lib.seccomp_attr_set(ctx, _ATTR_CTL_OPTIMIZE, 2)  # a binary tree: torch makes many calls

        def rule(name: str, action: int, *cmps: tuple[int, int, int, int]) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return  # not a call of this architecture (`open` on aarch64), or too new for this libseccomp
            array = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
            if rc < 0:
                raise OSError(-rc, f"seccomp rule for {name}: {os.strerror(-rc)}")

        rules(rule)
        return _export(lib, ctx)
    finally:
        lib.seccomp_release(ctx)


def _allow_list(rule: Rule) -> None:
    for name in ALLOWED:
        rule(name, _ACT_ALLOW)


def _refusals(rule: Rule) -> None:
    eperm = _act_errno(errno.EPERM)
    for name in REFUSED:
        rule(name, eperm)
    rule("clone3", _act_errno(errno.ENOSYS))
    for flag in _CLONE_NEW.values():
        rule("clone", eperm, (0, _CMP_MASKED_EQ, flag, flag))
        rule("unshare", eperm, (0, _CMP_MASKED_EQ, flag, flag))
    rule("unshare", eperm, (0, _CMP_MASKED_EQ, _CLONE_NEWTIME, _CLONE_NEWTIME))
    for option in REFUSED_PRCTL.values():
        rule("prctl", eperm, (0, _CMP_MASKED_EQ, 0xFFFFFFFF, option))
    for command in REFUSED_FCNTL.values():
        rule("fcntl", eperm, (1, _CMP_MASKED_EQ, 0xFFFFFFFF, command))
    # O_DIRECT turned on after the open (F_SETFL) read past the page cache as open(O_DIRECT) did.
    rule(
        "fcntl",
        eperm,
        (1, _CMP_MASKED_EQ, 0xFFFFFFFF, F_SETFL),
        (2, _CMP_MASKED_EQ, os.O_DIRECT, os.O_DIRECT),
    )
    # ioctl(fd, SIOC…): the sockets' interface and routing requests (0x89xx: SIOCGIFCONF,
    # SIOCGIFHWADDR, SIOCETHTOOL…) and the wireless ones (0x8Bxx). A run's own namespace has
    # only a loopback to show, but a socket answers for the namespace it was made in, and a run
    # holds sockets it did not make. FIONREAD and TIOCOUTQ (0x54xx) stay allowed.
    for requests in REFUSED_IOCTL_RANGES:
        rule("ioctl", eperm, (1, _CMP_MASKED_EQ, 0xFFFFFF00, requests))
    # Reads that go to the disk whatever the page cache holds: O_DIRECT on the read-only mounts
    # read 1 GB/s from the host's disk (a cloud volume's throughput is the database's too), and
    # POSIX_FADV_DONTNEED drops shared files from the cache for everyone. (`openat2`, whose flags
    # are out of a filter's reach, is not on the allow-list: libc and Python never need it.)
    rule("open", eperm, (1, _CMP_MASKED_EQ, os.O_DIRECT, os.O_DIRECT))
    rule("openat", eperm, (2, _CMP_MASKED_EQ, os.O_DIRECT, os.O_DIRECT))
    # The kernel reads fadvise's and madvise's advice as a 32-bit int: compared on all 64 bits,
    # `advice | 1 << 32` was the refused advice all the same (a review evicted a shared file with
    # it, and queued 512 MB of read-ahead in 0.1 s). The low 32 bits only, as for prctl and fcntl.
    rule("fadvise64", eperm, (3, _CMP_MASKED_EQ, 0xFFFFFFFF, POSIX_FADV_DONTNEED))
    # Read-ahead the caller does not wait for (fadvise or madvise WILLNEED and SEQUENTIAL,
    # readahead(2)) queued up to a gigabyte of reads behind the run's disk cap in a fraction of a
    # second: pages queued there stay locked, so the host's own reads of them waited up to the
    # run's wall time (8.9 s), and what was still queued when the run's cgroup went was read at
    # once, uncapped (1 GiB in 1.1 s). They are hints: they succeed and do nothing. A run's reads
    # still read ahead as the kernel chooses, in the reader's own time, under the cap.
    for advice in READ_AHEAD_HINTS.values():
        rule("fadvise64", _act_errno(0), (3, _CMP_MASKED_EQ, 0xFFFFFFFF, advice))
        rule("madvise", _act_errno(0), (2, _CMP_MASKED_EQ, 0xFFFFFFFF, advice))
    rule("readahead", _act_errno(0))
    # fsync and its kin on a file of the read-only mounts still sent the disk a cache flush, each
    # (an attacker's review: 6,000 flushes in 3 s, up to the run's disk cap, and a flush writes
    # out the device's whole cache, which the host's database commits then wait behind). A run
    # writes only to its tmpfs folders, where a flush has nothing to do: they succeed and do
    # nothing, as `sync` and `syncfs` are left off the allow-list for the same reason.
    for call in ("fsync", "fdatasync", "sync_file_range"):
        rule(call, _act_errno(0))
    rule("msync", _act_errno(0), (2, _CMP_MASKED_EQ, MS_SYNC, MS_SYNC))
    # preadv2(..., RWF_NOWAIT) fails rather than wait for the disk: on a shared read-only file it
    # said whether another run had just read it (its pages in the cache), the leak that inotify,
    # F_NOTIFY and leases are refused for. Without the flag a read is a read.
    for call in ("preadv2", "pwritev2"):
        rule(call, eperm, (5, _CMP_MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT))
    rule("setrlimit", eperm, (0, _CMP_MASKED_EQ, 0xFFFFFFFF, RLIMIT_CORE))
    rule("prlimit64", eperm, (1, _CMP_MASKED_EQ, 0xFFFFFFFF, RLIMIT_CORE), (2, _CMP_NE, 0, 0))
    # socket(AF_INET or AF_INET6, type, protocol): stream and datagram sockets only. With protocol
    # 0 the kernel picks one for the type: SOCK_SEQPACKET gets SCTP where its module is loaded,
    # past the protocol numbers refused below (an attacker's review). The type's low four bits;
    # the rest are SOCK_NONBLOCK and SOCK_CLOEXEC.
    for family in (2, 10):
        for kind in range(16):
            if kind not in ALLOWED_IP_SOCKET_TYPES:
                rule("socket", eperm, (0, _CMP_EQ, family, 0), (1, _CMP_MASKED_EQ, 0xF, kind))
    # socket(AF_INET or AF_INET6, type, protocol): only the default, TCP and UDP.
    for family in (2, 10):
        rule("socket", eperm, (0, _CMP_EQ, family, 0), (2, _CMP_GT, max(ALLOWED_IP_PROTOCOLS), 0))
        for protocol in range(max(ALLOWED_IP_PROTOCOLS)):
            if protocol not in ALLOWED_IP_PROTOCOLS:
                rule("socket", eperm, (0, _CMP_EQ, family, 0), (2, _CMP_EQ, protocol, 0))
    # socket(domain, ...): refused for every family above AF_INET6 (and any value with high
    # bits set, which the kernel would truncate to an int) and for each one below it but ours.
    for call in ("socket", "socketpair"):
        rule(call, eperm, (0, _CMP_GE, max(ALLOWED_SOCKET_FAMILIES) + 1, 0))
        for family in range(max(ALLOWED_SOCKET_FAMILIES)):
            if family not in ALLOWED_SOCKET_FAMILIES:
                rule(call, eperm, (0, _CMP_EQ, family, 0))


def _export(lib: ctypes.CDLL, ctx: int) -> bytes:
    r, w = os.pipe()
    try:
        rc = lib.seccomp_export_bpf(ctx, w)
        os.close(w)
        w = -1
        if rc < 0:
            raise OSError(-rc, f"seccomp_export_bpf: {os.strerror(-rc)}")
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def prepare() -> None:
    """In the zygote, once: compile the filters every runner will load."""
    global PROGRAMS, PROBLEM, _LOADABLE
    try:
        PROGRAMS = compile_filters()
    except (OSError, AttributeError) as exc:
        PROGRAMS, PROBLEM = None, f"no syscall filter: {exc}"
        return
    _LOADABLE = [_loadable(program) for program in PROGRAMS]


def _loadable(program: bytes) -> tuple[ctypes.Array, ctypes.Structure]:
    buf = ctypes.create_string_buffer(program, len(program))
    return buf, _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))


def install(programs: tuple[bytes, ...]) -> None:
    """Load the filters into this process, in order, for every thread it has and every process it
    will make. Irreversible; needs no_new_privs or CAP_SYS_ADMIN."""
    for program in programs:
        known = [prog for buf, prog in _LOADABLE if buf.raw == program]
        prog = known[0] if known else _loadable(program)[1]
        nr = _SYS_SECCOMP.get(platform.machine())
        if nr is not None:
            rc = _libc.syscall(
                ctypes.c_long(nr), ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
                ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog),
            )  # fmt: skip
        else:  # PR_SET_SECCOMP: this thread only, which is all a runner has before its code runs
            rc = _libc.prctl(22, 2, ctypes.byref(prog), 0, 0)
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp: {os.strerror(err)}")
