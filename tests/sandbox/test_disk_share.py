"""A run's disk reads are capped (cgroup io.max, v1 blkio.throttle): reading files the page cache
does not hold goes at `Limits.disk_bytes_per_s` at most. Before, one run reading the gigabytes it
may see (/usr, the Python environment) read 2.6 GiB in 8 s, and the host's own reads of the same
disk fell to a quarter of their speed."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox
from tests.support.pool import assert_still_works

MIB = 1 << 20


@pytest.fixture
def uncached_file() -> Iterator[Path]:
    """24 MiB on the disk, in a folder every run may read (the Python environment), with none of
    it in the page cache: reading it goes to the disk."""
    path = Path(sys.prefix) / f"ampquiz-disk-probe-{os.getpid()}.bin"
    if os.major(os.stat(sys.prefix).st_dev) == 0 and "tmpfs" in _filesystem_of(sys.prefix):
        pytest.skip(f"{sys.prefix} is on a tmpfs: its files are in memory, there is no disk to cap")
    with open(path, "wb") as f:
        f.write(os.urandom(24 * MIB))
        f.flush()
        os.fsync(f.fileno())
    try:
        yield path
    finally:
        path.unlink()


def _filesystem_of(path: str) -> str:
    """The type of the filesystem `path` is on, from the longest mount point above it."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, fstype, *_ = line.split()
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def _drop_from_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean and mapped by no one: it goes
    finally:
        os.close(fd)


READ = """
import time
t = time.perf_counter()
with open({path!r}, "rb", buffering=0) as f:
    while f.read(1 << 20):
        pass
print(round(time.perf_counter() - t, 2))
"""


def test_reading_the_disk_goes_no_faster_than_the_cap(sb: Sandbox, uncached_file: Path) -> None:
    _drop_from_cache(uncached_file)
    t = time.perf_counter()
    uncached_file.read_bytes()
    host_s = time.perf_counter() - t  # the same read, uncapped: this disk's own speed
    _drop_from_cache(uncached_file)
    r = sb.run(
        READ.format(path=str(uncached_file)), limits=Limits(disk_bytes_per_s=8 * MIB, wall_s=20)
    )
    assert r.status == "ok", r
    assert "disk-io-cap" in r.environment.protections
    # 24 MiB at 8 MiB/s: 3 s (the first slice may come at once), whatever the disk could do.
    assert float(r.stdout) >= 2.0, (
        f"read 24 MiB in {r.stdout.strip()} s under an 8 MiB/s cap (the host: {host_s:.2f} s)"
    )
    assert_still_works(sb)


def test_what_the_page_cache_holds_is_not_counted(sb: Sandbox, uncached_file: Path) -> None:
    """The cap is on the disk, not on reading: a file the host just read comes from memory."""
    uncached_file.read_bytes()  # now in the page cache
    r = sb.run(READ.format(path=str(uncached_file)), limits=Limits(disk_bytes_per_s=1 * MIB))
    assert r.status == "ok", r
    assert float(r.stdout) < 1.0, (
        f"read 24 MiB from the page cache in {r.stdout.strip()} s under a 1 MiB/s cap"
    )


def _cached_fraction(path: Path) -> float:
    """How much of the file the page cache holds (mincore over a mapping of it, which reads nothing)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), "mmap"
        vec = (ctypes.c_ubyte * pages)()
        try:
            assert libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vec) == 0, (
                "mincore"
            )
        finally:
            libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec) / pages


HINTS = """
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open({path!r}, os.O_RDONLY)
size = os.fstat(fd).st_size
said = [os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED), os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)]
said.append(libc.readahead(fd, ctypes.c_long(0), ctypes.c_size_t(size)))
m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
said += [m.madvise(mmap.MADV_WILLNEED), m.madvise(mmap.MADV_SEQUENTIAL)]
# The kernel reads the advice as a 32-bit int: with high bits set it is WILLNEED all the same.
libc.syscall.restype = ctypes.c_long
if os.uname().machine == "x86_64":  # fadvise64's number there
    said.append(libc.syscall(ctypes.c_long(221), ctypes.c_long(fd), ctypes.c_long(0), ctypes.c_long(size), ctypes.c_long(3 | 1 << 32)))
else:
    said.append(0)
print(said)
"""


def test_read_ahead_hints_queue_nothing_behind_the_cap(sb: Sandbox, uncached_file: Path) -> None:
    """fadvise/madvise WILLNEED and readahead(2) queued a gigabyte of reads behind a run's cap in a
    fraction of a second: the host's reads of those pages waited up to the run's wall time (they
    stay locked while queued), and what was still queued when the run's cgroup went was read at
    once, uncapped. They succeed now and read nothing."""
    _drop_from_cache(uncached_file)
    r = sb.run(HINTS.format(path=str(uncached_file)), limits=Limits(disk_bytes_per_s=1 * MIB))
    assert r.status == "ok", r
    assert r.stdout == "[None, None, 0, None, None, 0]\n", r.stdout  # each hint says it was taken
    time.sleep(1.5)  # the run's cgroup is gone: anything still queued behind its cap is read now
    assert _cached_fraction(uncached_file) < 0.1, "the hints read the file ahead after all"


def _flushes_sent_to(path: str) -> int | None:
    """Cache flushes the disk under `path` has been sent since boot (its block stat's 16th
    field), or None where `path` is not on a block device or the kernel does not count them."""
    device = os.stat(path).st_dev
    if os.major(device) == 0:
        return None
    node = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}").resolve()
    disk = node.parent if (node / "partition").exists() else node
    fields = (disk / "stat").read_text().split()
    return int(fields[15]) if len(fields) > 15 else None


FSYNC = """
import mmap, os
fd = os.open({path!r}, os.O_RDONLY)
for _ in range(1500):
    os.fsync(fd)
    os.fdatasync(fd)
with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mapped:
    for _ in range(500):
        mapped.flush()  # msync(MS_SYNC)
print("flushed")
"""


def test_fsync_on_a_shared_file_sends_the_disk_no_flush(sb: Sandbox) -> None:
    shared = (
        str(Path(sys.prefix) / "pyvenv.cfg")
        if (Path(sys.prefix) / "pyvenv.cfg").exists()
        else os.__file__
    )
    before = _flushes_sent_to(shared)
    if before is None:
        pytest.skip(f"{shared} is not on a disk this kernel counts flushes for")
    r = sb.run(FSYNC.format(path=shared), limits=Limits(wall_s=20))
    after = _flushes_sent_to(shared)
    assert r.status == "ok" and r.stdout == "flushed\n", r
    # 3,500 calls that each flushed the disk's cache before; the host's own writes meanwhile
    # account for a few.
    assert after - before < 300, f"the disk was sent {after - before} cache flushes during the run"
