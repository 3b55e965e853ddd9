"""The network namespaces runners are lent: made by the zygote, each held by one run at a time,
and entered again only when found as they were made.

Each runner lives in a network namespace that no other live run shares, with every interface down:
it reaches nothing, not even loopback. Making one per run (`unshare(CLONE_NEWNET)` in the runner)
cost about 0.5 ms of the runner's CPU and as much again of a kernel worker's when it was torn down,
about 5 % of the host's CPU per run on a 2-core host. So the zygote keeps them:

- it lends a namespace only to a runner that is pid 1 of its own pid namespace, and takes it back
  when it reaps that runner: by then the kernel has killed and reaped every process of the run,
  and closed every socket they held;
- only a root zygote lends them: the namespaces then belong to the zygote's user namespace, where
  a run (an unprivileged uid with no capabilities, `no_new_privs`) cannot change anything: bring
  an interface up, add an address, a route or a firewall rule, set a sysctl;
- the runner that is lent one joins it while it is still root and before any snippet runs, and
  stays only if it finds it as it was made: no socket of any family open in it and every interface
  down. Otherwise it makes a new one for itself, and the zygote lends the old one again later, to
  a runner that checks it again (a UDP socket of an ended run is freed a moment after its close).

What a namespace carries from one run to the next is its counters (`/proc/net/snmp`, `netstat`):
how many packets the earlier runs failed to send, never what was in them.

Runs in: the zygote (`NetworkNamespaces`) and the runner (`join`, during its preparation).
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct

from sandbox import isolation

_OWN = "/proc/thread-self/ns/net"
_NET = "/proc/thread-self/net"
SOCKET_COUNTS = ("sockstat", "sockstat6")
"""How many sockets of any family are open in a namespace (`sockets: used`; on kernels before 4.16
it counts the whole host's, and nothing is reused), of each IP protocol (`inuse`: TCP, UDP,
UDP-Lite, raw, fragments awaiting reassembly) and TCP's in TIME_WAIT (`tw`): each must be 0.
Counted, not listed: /proc/net/tcp walks the whole host's table, 3 ms on a quiet host."""
SOCKET_LISTS = ("unix", "icmp", "icmp6")
"""Unix sockets and ping sockets, listed (one header line, then a line per socket): short lists."""
_SIOCGIFFLAGS = 0x8913
_IFF_UP = 0x1
_IFREQ = "16sh22x"
"""struct ifreq (40 bytes): the interface's name, then its flags."""


def _as_made() -> bool:
    """Whether the namespace this thread is in has no socket and no interface up."""
    for table in SOCKET_COUNTS:
        try:
            with open(f"{_NET}/{table}", "rb") as f:
                for line in f.read().decode().splitlines():
                    words = line.split()
                    if any(key in ("used", "inuse", "tw") and value != "0" for key, value in zip(words[1::2], words[2::2])):
                        return False
        except FileNotFoundError:  # no IPv6 on this host
            continue
    for table in SOCKET_LISTS:
        try:
            with open(f"{_NET}/{table}", "rb") as f:
                if f.read().count(b"\n") > 1:
                    return False
        except FileNotFoundError:
            continue
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack(_IFREQ, name.encode()[:15], 0)
            flags = struct.unpack(_IFREQ, fcntl.ioctl(probe.fileno(), _SIOCGIFFLAGS, request))[1]
            if flags & _IFF_UP:
                return False
    return True


def join(fd: int) -> list[str]:
    """In the runner, while it is still root: joins the namespace `fd` it was lent (and closes the
    descriptor), or a new one where that one is not as it was made; returns ["net-namespace"], or
    [] where the host refuses both."""
    try:
        isolation.set_namespace(fd, isolation.CLONE_NEWNET)
        if _as_made():
            return ["net-namespace"]
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        isolation.unshare(isolation.CLONE_NEWNET)
    except OSError:
        return []
    return ["net-namespace"]


class NetworkNamespaces:
    """The zygote's namespaces: those lent to live runners, and those free for the next ones."""

    def __init__(self) -> None:
        self.own: int | None = None
        """The zygote's own namespace, to return to after making one; None where
        runners make their own (a zygote that is not root, or a host that refuses)."""
        self.free: list[int] = []
        self.lent: dict[int, int] = {}
        """Runner pid -> the namespace it holds."""
        if os.geteuid() != 0:
            return
        try:
            self.own = os.open(_OWN, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return

    def take(self) -> int | None:
        """A namespace for the next runner: a free one, or a new one; None if none can be made
        (the runner then makes its own, or goes without and says so)."""
        if self.own is None:
            return None
        if self.free:
            return self.free.pop()
        try:
            isolation.unshare(isolation.CLONE_NEWNET)
        except OSError:
            os.close(self.own)
            self.own = None  # the host refuses: never try again
            return None
        try:
            return os.open(_OWN, os.O_RDONLY | os.O_CLOEXEC)
        finally:
            self._back_home()

    def lend(self, pid: int, fd: int) -> None:
        self.lent[pid] = fd

    def give_back(self, fd: int) -> None:
        """A namespace taken but never lent (the fork failed)."""
        self.free.append(fd)

    def returned(self, pid: int) -> None:
        """The runner `pid` was reaped: its namespace is free for the next (which checks it: the
        zygote does not, as every page it writes between two forks is a copy and a split huge page)."""
        fd = self.lent.pop(pid, None)
        if fd is not None:
            self.free.append(fd)

    def descriptors(self) -> list[int]:
        """Every descriptor held here (a new runner closes all but its own)."""
        return [*([self.own] if self.own is not None else []), *self.free, *self.lent.values()]

    def _back_home(self) -> None:
        assert self.own is not None
        # Cannot fail for a process that just left it; if it did, the zygote would make sockets
        # and runners in a run's namespace: better to stop and be restarted by the pool.
        try:
            isolation.set_namespace(self.own, isolation.CLONE_NEWNET)
        except OSError:
            os._exit(70)
