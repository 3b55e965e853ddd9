"""Network namespaces are lent from run to run (`sandbox.net_namespaces`): a run never shares one
with another live run, finds nothing an earlier run left in it, and a namespace that is not as it
was made is never entered by a run."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sandbox import Sandbox, isolation, net_namespaces
from tests.support.pool import assert_still_works

LEAVE_SOCKETS = textwrap.dedent("""
    import os, socket
    left = []
    for family, kind, address in [(socket.AF_UNIX, socket.SOCK_STREAM, "\\0ampquiz-left"),
                                  (socket.AF_INET, socket.SOCK_STREAM, ("0.0.0.0", 7711)),
                                  (socket.AF_INET, socket.SOCK_DGRAM, ("0.0.0.0", 7712))]:
        s = socket.socket(family, kind)
        s.bind(address)
        if kind == socket.SOCK_STREAM:
            s.listen()
        left.append(s)
    print(os.readlink("/proc/self/ns/net"))
""")

FIND_SOCKETS = textwrap.dedent("""
    import os, socket
    print(os.readlink("/proc/self/ns/net"))
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\\0ampquiz-left")
        print("found the earlier run's socket")
    except OSError:
        pass
    for kind, port in [(socket.SOCK_STREAM, 7711), (socket.SOCK_DGRAM, 7712)]:
        try:
            socket.socket(socket.AF_INET, kind).bind(("0.0.0.0", port))
        except OSError:
            print("port", port, "still taken")
""")


def _namespace(r) -> str:
    assert r.status == "ok", r
    return r.stdout.splitlines()[0]


def test_a_run_finds_nothing_an_earlier_run_left_in_its_namespace(sb: Sandbox) -> None:
    first = sb.run(LEAVE_SOCKETS)
    assert first.status == "ok", first
    assert "net-namespace" in first.environment.protections
    seen = []
    for _ in range(12):
        r = sb.run(FIND_SOCKETS)
        seen.append(_namespace(r))
        assert r.stdout.splitlines()[1:] == [], r
        if seen[-1] == _namespace(first):
            break
    if os.geteuid() == 0:  # only a root zygote lends namespaces: check this test saw one reused
        assert _namespace(first) in seen, "no later run was lent the first run's namespace"
    assert_still_works(sb)


def test_runs_at_the_same_time_never_share_a_namespace(sb: Sandbox) -> None:
    holder = LEAVE_SOCKETS + "import time\ntime.sleep(3)\n"
    results = {}
    thread = threading.Thread(target=lambda: results.update(holder=sb.run(holder)))
    thread.start()
    try:
        time.sleep(0.5)  # the holder's snippet is running (a warm run starts in milliseconds)
        others = [sb.run(FIND_SOCKETS) for _ in range(4)]
    finally:
        thread.join()
    held = _namespace(results["holder"])
    for r in others:
        assert _namespace(r) != held, r
        assert r.stdout.splitlines()[1:] == [], r


# ---- the runner's check, on namespaces made here ---------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making network namespaces takes root")


@pytest.fixture
def lent() -> Iterator[tuple[net_namespaces.NetworkNamespaces, int]]:
    """A namespace made as the zygote makes them."""
    spaces = net_namespaces.NetworkNamespaces()
    fd = spaces.take()
    assert fd is not None
    yield spaces, fd
    os.close(fd)
    assert spaces.own is not None
    os.close(spaces.own)


@contextmanager
def _inside(spaces: net_namespaces.NetworkNamespaces, fd: int) -> Iterator[None]:
    """This thread in namespace `fd`, then back in its own."""
    isolation.set_namespace(fd, isolation.CLONE_NEWNET)
    try:
        yield
    finally:
        assert spaces.own is not None
        isolation.set_namespace(spaces.own, isolation.CLONE_NEWNET)


def _joined(fd: int) -> int:
    """In a child process, `net_namespaces.join` a copy of `fd`; returns the inode of the
    namespace the child ended up in."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            net_namespaces.join(os.dup(fd))
            os.write(w, str(os.stat("/proc/thread-self/ns/net").st_ino).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        inode = int(f.read())
    os.waitpid(pid, 0)
    return inode


@needs_root
def test_a_namespace_as_made_is_joined(lent) -> None:
    _, fd = lent
    assert _joined(fd) == os.fstat(fd).st_ino


@needs_root
@pytest.mark.parametrize("family", ["unix", "tcp", "udp"])
def test_a_namespace_with_a_socket_open_is_not_joined(lent, family: str) -> None:
    spaces, fd = lent
    with _inside(spaces, fd):
        if family == "unix":
            left = socket.socket(socket.AF_UNIX)
            left.bind("\0ampquiz-left-here")
        else:
            left = socket.socket(socket.AF_INET, socket.SOCK_STREAM if family == "tcp" else socket.SOCK_DGRAM)
            left.bind(("0.0.0.0", 7713))
    try:
        assert _joined(fd) != os.fstat(fd).st_ino
    finally:
        left.close()
    assert _joined(fd) == os.fstat(fd).st_ino  # closed: as made again


@needs_root
def test_a_namespace_with_loopback_up_is_not_joined(lent) -> None:
    spaces, fd = lent
    with _inside(spaces, fd), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh22x", fcntl.ioctl(s, 0x8913, struct.pack("16sh22x", b"lo", 0)))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", b"lo", flags | 1))  # SIOCSIFFLAGS: up
    assert _joined(fd) != os.fstat(fd).st_ino
