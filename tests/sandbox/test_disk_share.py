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
    with open(path, "wb") as f:
        f.write(os.urandom(24 * MIB))
        f.flush()
        os.fsync(f.fileno())
    try:
        yield path
    finally:
        path.unlink()


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
    r = sb.run(READ.format(path=str(uncached_file)), limits=Limits(disk_bytes_per_s=8 * MIB, wall_s=20))
    assert r.status == "ok", r
    assert "disk-io-cap" in r.environment.protections
    # 24 MiB at 8 MiB/s: 3 s (the first slice may come at once), whatever the disk could do.
    assert float(r.stdout) >= 2.0, f"read 24 MiB in {r.stdout.strip()} s under an 8 MiB/s cap (the host: {host_s:.2f} s)"
    assert_still_works(sb)


def test_what_the_page_cache_holds_is_not_counted(sb: Sandbox, uncached_file: Path) -> None:
    """The cap is on the disk, not on reading: a file the host just read comes from memory."""
    uncached_file.read_bytes()  # now in the page cache
    r = sb.run(READ.format(path=str(uncached_file)), limits=Limits(disk_bytes_per_s=1 * MIB))
    assert r.status == "ok", r
    assert float(r.stdout) < 1.0, f"read 24 MiB from the page cache in {r.stdout.strip()} s under a 1 MiB/s cap"
