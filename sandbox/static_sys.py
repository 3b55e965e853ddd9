"""What a run on a CPU host sees of /sys: copies of the files that say what its CPUs and memory
nodes are (`SYS_CPU_FILES`), on a read-only tmpfs, and none of the host's live counters.

`sandbox.filesystem` puts it in the root it builds (a CUDA host's root binds the live folders
instead, where NVML reads the PCI tree).

Runs in: the runner, while it is still root, in its own mount namespace; and the zygote's helper
that builds the root every run copies (`sandbox.root_template`).
"""

from __future__ import annotations

import glob
import os

from sandbox.isolation import MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY, MS_REMOUNT, mount

SYS_SYSTEM = "/sys/devices/system"
SYS_CPU_FILES = (
    "cpu/online", "cpu/possible", "cpu/present", "cpu/offline", "cpu/kernel_max", "cpu/isolated",
    "cpu/cpu*/online", "cpu/cpu*/topology/*", "cpu/cpu*/cache/index*/*",
    "node/online", "node/possible", "node/has_cpu", "node/has_memory", "node/has_normal_memory",
    "node/node*/cpulist", "node/node*/cpumap", "node/node*/distance",
)  # fmt: skip
"""What a run sees of /sys on a CPU host, under SYS_SYSTEM: copies, made when the root is built, of
the files that say what the CPUs and memory nodes are (glibc's CPU count reads cpu/online; thread
pools read the topology and the caches). The live folders, bound until now, also held the whole
host's counters: each node's meminfo, vmstat and numastat, each CPU's idle time (cpuidle). From
them one run read another's CPU and memory use (an attacker's review)."""


def static_sys(target: str) -> None:
    """SYS_CPU_FILES, copied from the host's SYS_SYSTEM onto a read-only tmpfs at `target` (a file
    the host will not let us read is left out, as sysfs leaves out what a CPU lacks)."""
    found = sorted(
        {
            p
            for pattern in SYS_CPU_FILES
            for p in glob.glob(f"{SYS_SYSTEM}/{pattern}")
            if os.path.isfile(p)
        }
    )
    os.makedirs(target, exist_ok=True)
    mount(
        "tmpfs",
        target,
        "tmpfs",
        MS_NOSUID | MS_NODEV | MS_NOEXEC,
        f"size={64 * 1024 + 4096 * len(found)},mode=755",
    )
    for path in found:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        copy = target + path[len(SYS_SYSTEM) :]
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        with open(copy, "wb") as f:
            f.write(data)
    mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
