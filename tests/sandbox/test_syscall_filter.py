"""Deny by default: a call the allow-list does not name fails as if the kernel lacked it. And kernel
surface no snippet needs is refused, whatever the list: namespaces, mounts, keyrings, io_uring, userfaultfd,
bpf, perf events, ptrace, non-IP sockets and IP ones but TCP and UDP, native AIO, inotify, fcntl's
notifications and leases, two prctl options, setting the core limit. Each test is a real run, then a normal run that still works.
"""

from __future__ import annotations

import ast
import errno
import os
import textwrap

import pytest

from sandbox import Sandbox
from tests.support.pool import assert_still_works

# ctypes' view of raw syscalls, for calls Python has no wrapper for (x86_64 numbers; the filter
# is built by name, so other architectures are covered too, but these probes are x86_64's).
SYSCALL = """
import ctypes, errno, os, platform
libc = ctypes.CDLL(None, use_errno=True)
kept = []
def text(b):  # the address of a C string, kept alive for the call
    kept.append(ctypes.c_char_p(b))
    return ctypes.cast(kept[-1], ctypes.c_void_p).value
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
"""

pytestmark = pytest.mark.skipif(
    __import__("platform").machine() != "x86_64", reason="the probes use x86_64 syscall numbers"
)


def run(sb: Sandbox, code: str) -> str:
    r = sb.run(SYSCALL + textwrap.dedent(code))
    assert r.status == "ok", r
    assert "syscall-filter" in r.environment.protections
    return r.stdout


def test_cant_make_a_user_namespace_or_any_other(sb: Sandbox) -> None:
    out = run(
        sb,
        """
        CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x20000, 0x40000000
        print("unshare user", call(272, CLONE_NEWUSER))
        print("unshare mount", call(272, CLONE_NEWNS))
        print("unshare user+net", call(272, CLONE_NEWUSER | CLONE_NEWNET))
        print("clone user", call(56, CLONE_NEWUSER | 17, 0, 0, 0, 0))  # would fork if allowed
        print("setns", call(308, 0, 0))
        print("clone3", call(435, 0, 0))
        try:
            open("/proc/self/ns/user").close()
            print("ns file opened")
        except OSError as e:
            print("ns file", type(e).__name__)
    """,
    )
    assert out.splitlines() == [
        "unshare user EPERM", "unshare mount EPERM", "unshare user+net EPERM", "clone user EPERM",
        "setns EPERM", "clone3 ENOSYS", "ns file opened",
    ], out  # fmt: skip
    assert_still_works(sb)


def test_cant_mount_anything(sb: Sandbox) -> None:
    out = run(
        sb,
        """
        print("mount", call(165, text(b"none"), text(b"/tmp"), text(b"tmpfs"), 0, 0))
        print("umount", call(166, text(b"/proc"), 2))
        print("fsopen", call(430, text(b"tmpfs"), 0))
        print("open_tree", call(428, -100, text(b"/tmp"), 1))
        print("pivot_root", call(155, text(b"/tmp"), text(b"/tmp")))
        print("chroot", call(161, text(b"/tmp")))
    """,
    )
    assert (
        out
        == "mount EPERM\numount EPERM\nfsopen EPERM\nopen_tree EPERM\npivot_root EPERM\nchroot EPERM\n"
    ), out
    assert_still_works(sb)


def test_cant_use_kernel_keyrings(sb: Sandbox) -> None:
    """Keys outlive the process that adds them and were read by a later run of the same uid."""
    out = run(
        sb,
        """
        KEY_SPEC_USER_KEYRING = -4
        print("add_key", call(248, text(b"user"), text(b"secret"), text(b"x"), 1, KEY_SPEC_USER_KEYRING))
        print("keyctl", call(250, 0, KEY_SPEC_USER_KEYRING, 0))  # KEYCTL_GET_KEYRING_ID
        print("request_key", call(249, text(b"user"), text(b"secret"), 0, 0))
    """,
    )
    assert out == "add_key EPERM\nkeyctl EPERM\nrequest_key EPERM\n", out
    assert_still_works(sb)


def test_cant_use_io_uring_userfaultfd_bpf_or_perf_events(sb: Sandbox) -> None:
    out = run(
        sb,
        """
        params = ctypes.create_string_buffer(120)
        print("io_uring_setup", call(425, 8, ctypes.addressof(params)))
        print("io_uring_enter", call(426, 0, 0, 0, 0, 0))
        print("userfaultfd", call(323, 0))
        print("bpf", call(321, 0, 0, 0))
        attr = ctypes.create_string_buffer(128)
        print("perf_event_open", call(298, ctypes.addressof(attr), 0, -1, -1, 0))
        print("init_module", call(175, 0, 0, 0))
        print("kexec_load", call(246, 0, 0, 0, 0))
        print("syslog", call(103, 3, 0, 0))  # read the kernel log
    """,
    )
    assert out.split() == [
        "io_uring_setup", "EPERM", "io_uring_enter", "EPERM", "userfaultfd", "EPERM", "bpf", "EPERM",
        "perf_event_open", "EPERM", "init_module", "EPERM", "kexec_load", "EPERM", "syslog", "EPERM",
    ], out  # fmt: skip
    assert_still_works(sb)


def test_cant_take_host_wide_budgets_or_watch_other_runs_files(sb: Sandbox) -> None:
    """Native AIO contexts count against the host's aio-max-nr (a run took all 65536, and the
    host's database could make none); inotify showed which files other runs opened in the folders
    all runs share."""
    out = run(
        sb,
        """
        ctx = ctypes.c_ulong(0)
        print("io_setup", call(206, 65536, ctypes.addressof(ctx)))
        print("io_submit", call(209, 0, 0, 0))
        print("inotify_init1", call(294, 0))
        print("inotify_init", call(253))
    """,
    )
    assert out == "io_setup EPERM\nio_submit EPERM\ninotify_init1 EPERM\ninotify_init EPERM\n", out
    assert_still_works(sb)


def test_cant_outlive_the_server_or_dump_memory_to_the_host(sb: Sandbox) -> None:
    """PR_SET_PDEATHSIG cleared let a run live on after the server died; PR_SET_DUMPABLE set let
    its crash send its memory to the host's core handler, whatever RLIMIT_CORE says. Reading
    them still works, and other options too."""
    out = run(
        sb,
        """
        print("clear parent-death signal", call(157, 1, 0, 0, 0, 0))
        print("same, high bits set", call(157, 1 | (1 << 32), 0, 0, 0, 0))
        print("make dumpable", call(157, 4, 1, 0, 0, 0))
        signal = ctypes.c_int(0)
        print("read parent-death signal", call(157, 2, ctypes.addressof(signal), 0, 0, 0), signal.value)
        print("read dumpable", call(157, 3, 0, 0, 0, 0))
        print("set name", call(157, 15, text(b"snippet"), 0, 0, 0))
    """,
    )
    assert out.splitlines() == [
        "clear parent-death signal EPERM", "same, high bits set EPERM", "make dumpable EPERM",
        "read parent-death signal ok 9", "read dumpable ok", "set name ok",
    ], out  # fmt: skip
    assert_still_works(sb)


def test_a_crash_can_never_be_dumped_to_the_host(sb: Sandbox) -> None:
    """A program the run execs is dumpable again whatever prctl allowed; a core_pattern that
    pipes to a handler ignores a core limit of 0, but reads 1 as "no dump". So the limit is 1, in
    every process of the run, and no process may set it (lowered to 0, a crash would dump)."""
    out = run(
        sb,
        """
        import resource, subprocess, sys
        print("limit", resource.getrlimit(resource.RLIMIT_CORE))
        print("in an exec'd child", subprocess.run([sys.executable, "-c",
              "import resource; print(resource.getrlimit(resource.RLIMIT_CORE))"], capture_output=True, text=True).stdout.strip())
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            print("lowered")
        except (OSError, ValueError) as exc:
            print("lowering refused", type(exc).__name__)
        print("prlimit64 set", call(302, 0, 4, text(bytes(16)), 0))
        print("prlimit64 read", call(302, 0, 4, 0, text(bytes(16))))
        print("setrlimit of another limit", call(160, 7, text(bytes(16))))  # RLIMIT_NOFILE to 0: allowed
    """,
    )
    assert out.splitlines() == [
        "limit (1, 1)", "in an exec'd child (1, 1)", "lowering refused ValueError",  # Python says EPERM so
        "prlimit64 set EPERM", "prlimit64 read ok", "setrlimit of another limit ok",
    ], out  # fmt: skip
    assert_still_works(sb)


def test_cant_watch_or_lease_shared_files(sb: Sandbox) -> None:
    """fcntl's directory notifications showed which files other runs and the host read (as
    inotify did); a lease on a shared read-only file would make other runs' opens wait."""
    out = run(
        sb,
        """
        import fcntl, signal
        fd = os.open("/usr/share/zoneinfo", os.O_RDONLY)
        print("F_NOTIFY", call(72, fd, 1026, 0x80000001))  # DN_ACCESS | DN_MULTISHOT
        print("F_SETLEASE", call(72, fd, 1024, 0))
        print("F_GETFL", call(72, fd, 3, 0))
    """,
    )
    assert out.splitlines() == ["F_NOTIFY EPERM", "F_SETLEASE EPERM", "F_GETFL ok"], out
    assert_still_works(sb)


def test_ip_sockets_are_tcp_and_udp_only(sb: Sandbox) -> None:
    out = run(
        sb,
        """
        import socket
        for family in (socket.AF_INET, socket.AF_INET6):
            for kind, protocol, name in ((socket.SOCK_STREAM, 0, "default"), (socket.SOCK_STREAM, 6, "tcp"),
                                         (socket.SOCK_DGRAM, 17, "udp"), (socket.SOCK_STREAM, 262, "mptcp"),
                                         (socket.SOCK_STREAM, 132, "sctp"), (socket.SOCK_DGRAM, 1, "icmp"),
                                         (socket.SOCK_SEQPACKET, 0, "seqpacket"),  # SCTP, where its module is loaded
                                         (socket.SOCK_RAW, 0, "raw"), (socket.SOCK_DGRAM | socket.SOCK_NONBLOCK, 0, "udp nonblocking")):
                try:
                    socket.socket(family, kind, protocol).close()
                    print(name, "ok")
                except OSError as exc:
                    print(name, errno.errorcode[exc.errno])
    """,
    )
    assert out.splitlines() == 2 * [
        "default ok",
        "tcp ok",
        "udp ok",
        "mptcp EPERM",
        "sctp EPERM",
        "icmp EPERM",
        "seqpacket EPERM",
        "raw EPERM",
        "udp nonblocking ok",
    ], out
    assert_still_works(sb)


def test_cant_trace_or_read_another_process(sb: Sandbox) -> None:
    out = run(
        sb,
        """
        child = os.fork()
        if child == 0:
            import time
            time.sleep(30)
            os._exit(0)
        print("ptrace", call(101, 16, child, 0, 0))  # PTRACE_ATTACH
        print("process_vm_readv", call(310, child, 0, 0, 0, 0, 0))
        print("pidfd_getfd", call(438, 0, 0, 0))
        os.kill(child, 9)
        os.waitpid(child, 0)
    """,
    )
    assert out == "ptrace EPERM\nprocess_vm_readv EPERM\npidfd_getfd EPERM\n", out
    assert_still_works(sb)


def test_cant_open_sockets_other_than_unix_and_ip(sb: Sandbox) -> None:
    r = sb.run(
        textwrap.dedent("""
        import socket
        families = {"AF_VSOCK": 40, "AF_NETLINK": 16, "AF_PACKET": 17, "AF_ALG": 38, "AF_BLUETOOTH": 31, "AF_CAN": 29, "AF_TIPC": 30}
        for name, family in families.items():
            try:
                socket.socket(family, socket.SOCK_DGRAM if name != "AF_ALG" else socket.SOCK_SEQPACKET)
                print(name, "opened")
            except OSError as e:
                print(name, e)
        for family in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6):
            socket.socket(family, socket.SOCK_STREAM).close()
        print("unix and ip sockets still open")
        socket.socket(40, socket.SOCK_STREAM)  # AF_VSOCK reached the host side
    """)
    )
    assert r.status == "error", r
    lines = r.stdout.splitlines()
    assert lines[:-1] == [
        f"{name} [Errno 1] Operation not permitted"
        for name in [
            "AF_VSOCK",
            "AF_NETLINK",
            "AF_PACKET",
            "AF_ALG",
            "AF_BLUETOOTH",
            "AF_CAN",
            "AF_TIPC",
        ]
    ]
    assert lines[-1] == "unix and ip sockets still open"
    # A refused call reads clearly: the error, and that the sandbox refused it.
    assert (
        r.exception.type == "PermissionError" and "Operation not permitted" in r.exception.message
    )
    assert "syscall filter" in r.message, r.message
    assert_still_works(sb)


def test_cant_reach_refused_calls_through_another_syscall_table(sb: Sandbox) -> None:
    out = run(
        sb,
        """
        X32 = 0x40000000
        print("x32 unshare", call(X32 | 272, 0x10000000))
        print("x32 getpid", call(X32 | 39))
        print("socket with high bits", call(41, (1 << 32) | 40, 1, 0))
    """,
    )
    assert out == "x32 unshare EPERM\nx32 getpid EPERM\nsocket with high bits EPERM\n", out
    assert_still_works(sb)


def test_threads_fork_and_subprocess_still_work_under_the_filter(sb: Sandbox) -> None:
    """clone3 is refused with ENOSYS, so libc falls back to clone, which the filter reads."""
    r = sb.run(
        textwrap.dedent("""
        import os, subprocess, threading, torch
        t = threading.Thread(target=lambda: print("thread"))
        t.start(); t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        print("fork", os.waitpid(pid, 0)[1] >> 8)
        print(subprocess.run(["/bin/echo", "subprocess"], capture_output=True, text=True).stdout.strip())
        torch.set_num_threads(2)
        print("torch", torch.ones(256, 256).matmul(torch.ones(256, 256)).sum().item())
    """)
    )
    assert r.status == "ok", r
    assert r.stdout == "thread\nfork 7\nsubprocess\ntorch 16777216.0\n", r
    assert_still_works(sb)


def test_a_host_without_libseccomp_runs_on_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the library is missing, the zygote compiles no filter and says why; each runner then
    leaves "syscall-filter" out of its protections (sandbox.runner), and the pool logs it."""
    from sandbox import seccomp

    def missing() -> None:
        raise OSError("libseccomp.so.2: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(seccomp, "_load_library", missing)
    monkeypatch.setattr(seccomp, "PROGRAMS", (b"",))
    monkeypatch.setattr(seccomp, "PROBLEM", "")
    seccomp.prepare()
    assert seccomp.PROGRAMS is None
    assert "no syscall filter" in seccomp.PROBLEM and "libseccomp.so.2" in seccomp.PROBLEM


def test_a_call_the_allow_list_does_not_name_is_refused_as_if_the_kernel_lacked_it(
    sb: Sandbox,
) -> None:
    """Deny by default: calls a snippet never needs, each harmless-looking and each one a
    default-allow filter let through (`sync` flushed every file system of the host, thousands
    of times a second), fail with ENOSYS, what libc and Python take for a kernel without them."""
    out = run(
        sb,
        """
        print("sync", call(162))
        print("msgget", call(68, 0, 0o1000))
        print("personality", call(135, 0xFFFFFFFF))
        print("unshare files", call(272, 0x400))
        print("landlock", call(444, 0, 0, 1))
        print("name_to_handle_at", call(303, -100, text(b"/tmp"), 0, 0, 0))
    """,
    )
    assert out.splitlines() == [
        "sync ENOSYS", "msgget ENOSYS", "personality ENOSYS", "unshare files ENOSYS", "landlock ENOSYS",
        "name_to_handle_at ENOSYS",
    ], out  # fmt: skip
    assert_still_works(sb)


def test_a_call_refused_as_unimplemented_says_why(sb: Sandbox) -> None:
    """A call the allow-list does not name raises OSError ENOSYS in Python, "Function not
    implemented", which alone reads like a bug in Python: the run's message says the sandbox
    lets a run make only the calls Python and torch need."""
    r = sb.run("import time\ntime.clock_settime(time.CLOCK_REALTIME, 0)")
    assert (
        r.status == "error"
        and r.exception is not None
        and "Function not implemented" in r.exception.message
    ), r
    assert r.message.endswith("the sandbox lets a run make only the system calls Python and torch need, "
                              "and answers any other as a kernel without it would."), r.message  # fmt: skip
    assert_still_works(sb)


IFCONF = """
import array, fcntl, os, socket, struct
def interfaces(fd):
    buf = array.array("B", b"\\0" * 40 * 32)
    addr, _ = buf.buffer_info()
    try:
        out = fcntl.ioctl(fd, 0x8912, struct.pack("iL", len(buf), addr))  # SIOCGIFCONF
    except OSError as e:
        return e.errno
    size = struct.unpack("iL", out)[0]
    raw = buf.tobytes()[:size]
    return sorted(raw[i:i + 16].split(b"\\0", 1)[0].decode() for i in range(0, size, 40))
seen = {}
for name in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
            seen[name] = interfaces(int(name))
    except OSError:
        pass
seen["own"] = interfaces(socket.socket().fileno())
print(seen)
"""


def test_no_socket_a_run_holds_shows_the_hosts_network_interfaces(sb: Sandbox) -> None:
    """A socket answers interface requests for the network namespace it was made in: the run's
    control socket was made by the zygote in the host's, and SIOCGIFCONF on it listed the host's
    interfaces and addresses (an attacker's review). Now every such request is refused, and the
    zygote makes those sockets in a namespace of its own anyway."""
    seen = ast.literal_eval(run(sb, IFCONF))  # {fd: interface names, or the errno of the refusal}
    assert len(seen) >= 2, seen  # its own socket and the one it was handed
    assert all(found == errno.EPERM for found in seen.values()), seen
    assert (
        run(
            sb,
            "import fcntl, socket, struct\na, b = socket.socketpair()\na.send(b'xyz')\n"
            "print(struct.unpack('i', fcntl.ioctl(b, 0x541B, bytes(4)))[0])\n",
        )
        == "3\n"
    )  # FIONREAD
    assert_still_works(sb)


def test_the_zygote_makes_the_runs_sockets_outside_the_hosts_network_namespace(sb: Sandbox) -> None:
    assert sb.zygote is not None
    assert os.readlink(f"/proc/{sb.zygote.pid}/ns/net") != os.readlink("/proc/self/ns/net")


def test_cant_read_past_the_page_cache_or_drop_it_for_everyone(sb: Sandbox) -> None:
    """O_DIRECT reads of the read-only mounts went to the host's disk at 1 GB/s (an attacker's
    review), POSIX_FADV_DONTNEED drops shared files from the cache, and RWF_NOWAIT tells whether
    they are in it. All refused; a plain open and read, and other advice, still work."""
    out = run(
        sb,
        """
        import os
        path = os.__file__
        try:
            os.open(path, os.O_RDONLY | os.O_DIRECT)
            print("direct: ok")
        except OSError as e:
            print("direct:", errno.errorcode[e.errno])
        fd = os.open(path, os.O_RDONLY)
        print("plain:", len(os.read(fd, 10)))
        for advice in ("POSIX_FADV_DONTNEED", "POSIX_FADV_SEQUENTIAL"):
            try:
                os.posix_fadvise(fd, 0, 0, getattr(os, advice))
                print(advice, "ok")
            except OSError as e:
                print(advice, errno.errorcode[e.errno])
        print("openat2:", call(437, -100, text(path.encode()), 0, 0))
        # The kernel reads the advice as a 32-bit int: high bits set, it is DONTNEED all the same.
        print("fadvise64 DONTNEED | 1 << 32:", call(221, fd, 0, 0, 4 | 1 << 32))
        import fcntl  # O_DIRECT turned on after the open read past the cache as open(O_DIRECT) did
        try:
            fcntl.fcntl(fd, fcntl.F_SETFL, os.O_DIRECT)
            print("F_SETFL O_DIRECT: ok")
        except OSError as e:
            print("F_SETFL O_DIRECT:", errno.errorcode[e.errno])
        print("F_SETFL O_NONBLOCK:", fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK))
        # RWF_NOWAIT: a read that fails rather than wait for the disk said whether another run
        # had just read a shared file (an attacker's review). Without the flag, preadv2 reads.
        for flags in (os.RWF_NOWAIT, 0):
            try:
                print("preadv2", flags, os.preadv(fd, [bytearray(10)], 0, flags))
            except OSError as e:
                print("preadv2", flags, errno.errorcode[e.errno])
    """,
    )
    assert out == ("direct: EPERM\nplain: 10\nPOSIX_FADV_DONTNEED EPERM\nPOSIX_FADV_SEQUENTIAL ok\n"
                   "openat2: ENOSYS\nfadvise64 DONTNEED | 1 << 32: EPERM\nF_SETFL O_DIRECT: EPERM\nF_SETFL O_NONBLOCK: 0\n"
                   "preadv2 8 EPERM\npreadv2 0 10\n"), out  # fmt: skip
    assert_still_works(sb)
