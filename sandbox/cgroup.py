"""A per-run control group capping memory, process count, CPU and disk I/O, where the host lets us
write one.

Supports the unified hierarchy (cgroup v2) and the legacy `memory`, `pids`, `cpu` and `blkio`
controllers (v1). A cgroup is the only cap that also covers processes the snippet spawns (24 spinning children
share one core's worth of CPU, not the host's), and the only reliable way to find and kill all of
them when there is no pid namespace.

Runs in: the runner (creates its cgroup and joins it, while still root), the zygote (learns once
which caps a run's cgroup holds here, sweeps cgroups left by an earlier zygote) and the server
(sets the caps before a run's code is sent, reads the OOM count after the run, removes the cgroup). The runner drops root before its code
arrives and no longer sees /sys/fs/cgroup, so the caps are the pool's to write.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path

from sandbox.cgroup_place import ROOT, unified_base, writable_dir
from sandbox.pidfd_kill import kill_members

CPU_PERIOD_US = 100_000
"""The CPU cap's period, the kernel's default: `cpu_cores` x this much CPU time per this much wall
time (v1 keeps the default cpu.cfs_period_us; v2's cpu.max names it)."""

PREPARING_CPU_WEIGHT = {"unified": ("cpu.weight", b"11"), "cpu": ("cpu.shares", b"110")}
"""A runner's CPU weight while it prepares (its cgroup is made with it): a nice-10 process's share
(110 against 1024). A replacement runner is prepared while the run before it executes and its
result is delivered; at this weight it takes the CPU those leave over, and still about a tenth of
a core on a host that leaves none, so preparation never stalls outright."""
RUNNING_CPU_WEIGHT = {"unified": ("cpu.weight", "100"), "cpu": ("cpu.shares", "1024")}
"""The kernel's default weight: what a run's cgroup gets back when its code is sent."""


def _own_path(controller: str | None) -> str | None:
    """This process's cgroup path for a v1 controller, or the v2 path when controller is None."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller is None and controllers == "":
                return path
            if controller and controller in controllers.split(","):
                return path
    except OSError:
        pass
    return None


class RunCgroup:
    """The cgroup(s) of one run: `dirs` maps a role (`memory`, `pids`, or `unified`) to its folder."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    @classmethod
    def from_paths(cls, paths: dict[str, str]) -> RunCgroup:
        """The same cgroup in another process, from the folders its creator reported."""
        return cls({role: Path(p) for role, p in paths.items()})

    @property
    def features(self) -> list[str]:
        """The caps this cgroup can hold: on v2 a controller the parent did not delegate leaves
        no file to write, and then the cap is not claimed."""
        caps = {
            "cgroup-memory": (("unified", "memory.max"), ("memory", "memory.limit_in_bytes")),
            "cgroup-pids": (("unified", "pids.max"), ("pids", "pids.max")),
            "cpu-cap": (("unified", "cpu.max"), ("cpu", "cpu.cfs_quota_us")),
            "disk-io-cap": (("unified", "io.max"), ("blkio", "blkio.throttle.read_bps_device")),
        }
        if not host_disks():
            del caps["disk-io-cap"]  # nothing to cap: claimed only where a disk is
        return [
            cap for cap, files in caps.items()
            if any(role in self.dirs and (self.dirs[role] / name).exists() for role, name in files)
        ]  # fmt: skip

    def usage_bytes(self) -> int:
        for role, d in self.dirs.items():
            name = {"unified": "memory.current", "memory": "memory.usage_in_bytes"}.get(role)
            if name:
                try:
                    return int((d / name).read_text())
                except (OSError, ValueError):
                    pass
        return 0

    def tasks(self) -> int:
        """The threads in the cgroup (pids.max counts threads); 1 where it cannot tell."""
        for role in ("unified", "pids"):
            d = self.dirs.get(role)
            if d is not None:
                try:
                    return max(
                        1,
                        len(
                            (d / "cgroup.threads" if role == "unified" else d / "tasks")
                            .read_text()
                            .split()
                        ),
                    )
                except OSError:
                    pass
        return 1

    def set_limits(
        self,
        *,
        memory_bytes: int | None = None,
        processes: int | None = None,
        cpu_cores: float | None = None,
        disk_bytes_per_s: int | None = None,
        disk_ios_per_s: int | None = None,
    ) -> None:
        """Write the caps given (None: leave as is). `memory_bytes` is absolute: the caller adds
        what the prepared runner already holds (torch, a CUDA context). The disk caps are written
        together, for every disk of the host (`host_disks`)."""
        if disk_bytes_per_s is not None and disk_ios_per_s is not None:
            self._set_disk_caps(disk_bytes_per_s, disk_ios_per_s)
        quota = None if cpu_cores is None else max(1000, int(cpu_cores * CPU_PERIOD_US))
        files: dict[str, list[tuple[str, object]]] = {
            "unified": [
                ("memory.max", memory_bytes), ("memory.swap.max", 0 if memory_bytes is not None else None),
                ("pids.max", processes), ("cpu.max", None if quota is None else f"{quota} {CPU_PERIOD_US}"),
            ],
            "memory": [("memory.limit_in_bytes", memory_bytes)],
            "pids": [("pids.max", processes)],
            "cpu": [("cpu.cfs_quota_us", quota)],  # the period is the kernel's default, CPU_PERIOD_US
        }  # fmt: skip
        for role, d in self.dirs.items():
            for name, value in files.get(role, []):
                if value is not None:
                    try:
                        (d / name).write_text(str(value))
                    except OSError:
                        pass

    def _set_disk_caps(self, bytes_per_s: int, ios_per_s: int) -> None:
        """One line per disk, each written on its own (the kernel takes one rule per write); a
        disk the kernel will not throttle (it refuses the line) is skipped, the others keep theirs."""
        lines: list[tuple[Path, str]] = []
        for disk in host_disks():
            if "unified" in self.dirs:
                lines.append((self.dirs["unified"] / "io.max",
                              f"{disk} rbps={bytes_per_s} wbps={bytes_per_s} riops={ios_per_s} wiops={ios_per_s}"))  # fmt: skip
            if "blkio" in self.dirs:
                for name, value in (("read_bps", bytes_per_s), ("write_bps", bytes_per_s),
                                    ("read_iops", ios_per_s), ("write_iops", ios_per_s)):  # fmt: skip
                    lines.append(
                        (self.dirs["blkio"] / f"blkio.throttle.{name}_device", f"{disk} {value}")
                    )
        for path, line in lines:
            try:
                path.write_text(line)
            except OSError:
                pass

    def set_running_weight(self) -> None:
        """Back to the default CPU weight, from `PREPARING_CPU_WEIGHT`: the snippet competes with
        everything else on the host as any process would."""
        for role, d in self.dirs.items():
            if role in RUNNING_CPU_WEIGHT:
                name, value = RUNNING_CPU_WEIGHT[role]
                try:
                    (d / name).write_text(value)
                except OSError:
                    pass  # no cpu controller here: the weight was never lowered either

    def oom_killed(self) -> bool:
        for role, d in self.dirs.items():
            try:
                if role == "unified":
                    events = dict(
                        line.split() for line in (d / "memory.events").read_text().splitlines()
                    )
                    if int(events.get("oom_kill", 0)) > 0:
                        return True
                elif role == "memory":
                    for line in (d / "memory.oom_control").read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value) > 0:
                            return True
            except (OSError, ValueError):
                pass
        return False

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs.values():
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return found

    def kill_all(self) -> None:
        for role, d in self.dirs.items():
            if role == "unified":
                try:
                    (d / "cgroup.kill").write_text("1")
                except OSError:
                    pass
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            kill_members(pids, self.pids)
            time.sleep(0.002)

    def remove(self) -> None:
        self.kill_all()
        _retry_left_behind()
        for d in self.dirs.values():
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
            else:  # its last process still tearing down (a run's many files, say): later
                with _LEFT_LOCK:
                    _LEFT_BEHIND.add(d)


@functools.cache
def host_disks() -> tuple[str, ...]:
    """Every disk of the host that holds anything, as `MAJ:MIN`: the whole disks /sys/block lists
    (the kernel throttles a disk, not a partition), loop devices with an image attached included.
    All of them, not only the one behind the run's root: what a run may read lies on whichever
    disks the host mounted its folders from, and an overlay root names no disk at all. Read once."""
    found = []
    for disk in sorted(Path("/sys/block").glob("*")):
        try:
            if int((disk / "size").read_text()) > 0:
                found.append((disk / "dev").read_text().strip())
        except (OSError, ValueError):
            continue
    return tuple(found)


_LEFT_BEHIND: set[Path] = set()
"""Run cgroups whose removal outlasted its wait: tried again at every later removal. Given up on,
one a run leaked for good, and cgroup v1 holds 65,535 memory cgroups: past that, no run gets one."""
_LEFT_LOCK = threading.Lock()


def _retry_left_behind() -> None:
    with _LEFT_LOCK:
        for d in list(_LEFT_BEHIND):
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                continue
            _LEFT_BEHIND.discard(d)


def _zygote_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CgroupFactory:
    """Finds, once, where this host lets us create cgroups, then makes one per run."""

    def __init__(self) -> None:
        self.bases: dict[str, Path] = {}
        unified = _own_path(None)
        if (ROOT / "cgroup.controllers").exists() and unified is not None:
            base = unified_base(ROOT / unified.lstrip("/"))
            if base is not None:
                self.bases["unified"] = base
        if not self.bases:
            for controller in ("memory", "pids", "cpu", "blkio"):
                own = _own_path(controller)
                if own is not None and (ROOT / controller).is_dir():
                    base = writable_dir(ROOT / controller / own.lstrip("/"))
                    if base is not None:
                        self.bases[controller] = base
        self._base_paths = {role: str(base) for role, base in self.bases.items()}
        self.features: list[str] = []
        """The caps a run's cgroup holds here, the same for every one: learnt once, from a probe."""
        probe = self.create(f"ampquiz-probe-{os.getpid()}-features") if self.bases else None
        if probe is not None:
            self.features = probe.features
            for d in probe.dirs.values():
                try:
                    d.rmdir()
                except OSError:
                    pass

    def sweep(self, prefix: str = "ampquiz-run-") -> None:
        """Remove run cgroups left empty by a pool that died; rmdir refuses any still in use. A
        run cgroup's name starts with its zygote's pid: another pool's, whose zygote lives, are
        its own (on cgroup v1 the pids and cpu folders are shared by every pool, and one just made
        for a runner about to join it is empty)."""
        for base in self.bases.values():
            for d in base.glob(prefix + "*"):
                owner = d.name[len(prefix) :].split("-", 1)[0]
                if owner.isdigit() and _zygote_alive(int(owner)):
                    continue
                try:
                    d.rmdir()
                except OSError:
                    pass

    @property
    def available(self) -> bool:
        return bool(self.bases)

    def join(self, name: str) -> dict[str, str] | None:
        """In a runner: make its cgroup `name` and move this process into it; returns the folders
        (for the pool), or None if it could not join. Plain `os` calls on paths made once: this
        runs in every runner, where each Python object touched costs a page copy."""
        made: dict[str, str] = {}
        pid = b"%d" % os.getpid()
        try:
            for role, base in self._base_paths.items():
                path = f"{base}/{name}"
                os.mkdir(path)
                made[role] = path
                if (
                    role in PREPARING_CPU_WEIGHT
                ):  # before joining: all of preparation at that weight
                    weight_file, weight = PREPARING_CPU_WEIGHT[role]
                    try:
                        fd = os.open(f"{path}/{weight_file}", os.O_WRONLY)
                        try:
                            os.write(fd, weight)
                        finally:
                            os.close(fd)
                    except OSError:
                        pass  # no cpu controller delegated: prepared at the default weight
            for path in made.values():
                fd = os.open(f"{path}/cgroup.procs", os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
        except OSError:
            for path in made.values():
                try:
                    os.rmdir(path)
                except OSError:
                    pass  # left for `sweep` (it already holds this process)
            return None
        return made

    def create(self, name: str) -> RunCgroup | None:
        dirs = {}
        for role, base in self.bases.items():
            d = base / name
            try:
                d.mkdir()
                dirs[role] = d
            except OSError:
                pass
        return RunCgroup(dirs) if dirs else None
