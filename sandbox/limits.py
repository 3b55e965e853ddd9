"""Resource limits for one sandboxed run. Units are in the field names, so a call site reads plainly.

Runs in: the server (the runner gets the limits as plain data, with its code).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    """Wall-clock time from the moment the snippet starts until the whole process group is killed."""
    cpu_s: int = 10
    """CPU seconds (RLIMIT_CPU); an infinite loop ends here even if the wall clock is generous."""
    memory_bytes: int = 1 << 30
    """Address-space cap on CPU runs (cgroup memory.max where writable, else RLIMIT_AS)."""
    output_bytes: int = 64 * 1024
    """Captured stdout and stderr, each; the rest is dropped and the run ends with `output_limit`."""
    file_bytes: int = 16 * 1024 * 1024
    """Largest file the snippet may write (RLIMIT_FSIZE)."""
    processes: int = 16
    """Processes and threads the run may hold at once (cgroup pids.max, else RLIMIT_NPROC). The
    runner is one; torch's thread pools are held at `torch_threads` (OMP_NUM_THREADS=1, and the
    runner sets torch.set_num_threads), so a snippet has room for a few processes or threads of its own."""
    open_files: int = 64
    """File descriptors (RLIMIT_NOFILE)."""
    cpu_cores: float = 1.0
    """CPU the whole run may use at once, in cores (cgroup cpu.max, v1 cpu.cfs_quota_us): however
    many processes a snippet forks, together they get this much, and other runs the rest."""
    disk_bytes_per_s: int = 64 * 1024 * 1024
    """What the whole run may read from (or write to) each of the host's disks per second (cgroup
    io.max, v1 blkio.throttle). Reads the page cache answers are not counted: a snippet that reads
    what torch's import already read never meets it. Without it one run reading gigabytes of the
    files it may see (/usr, the Python environment) took a shared disk from everyone."""
    disk_ios_per_s: int = 2000
    """Disk operations per second, likewise: many small reads (a walk over many small files) are
    capped as well as large ones."""

    torch_threads: int = 1
    """The threads torch computes an op with (`torch.set_num_threads`): one, as a run has a core.
    A learner's machine has several, and a large float32 sum's last digits depend on how many
    threads added it up: a key's second proof run asks for two (`app.verify.check.again_limits`),
    so a key that holds only for one thread is found."""

    def to_dict(self) -> dict:
        return asdict(self)
