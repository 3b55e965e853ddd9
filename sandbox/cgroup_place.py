"""Where run cgroups can go on this host: a folder the pool may write, and on cgroup v2 one whose
children can be given the memory, pids and cpu controllers (`unified_base`).

Runs in: the zygote, once, when it learns which caps a run's cgroup can hold (`CgroupFactory`).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def writable_dir(base: Path) -> Path | None:
    probe = base / f"ampquiz-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
        return base
    except OSError:
        return None


CAPS = ("memory", "pids", "cpu")
EXTRA_CAPS = ("io",)
"""Turned on where they can be, never required of a place: a host without them still caps the rest."""


def _delegate(base: Path) -> set[str]:
    """Turn on the caps for `base`'s children; returns those of CAPS that are on."""
    for controller in (*CAPS, *EXTRA_CAPS):
        try:
            (base / "cgroup.subtree_control").write_text(f"+{controller}")
        except OSError:
            pass  # processes in `base` itself (cgroup v2 lets only a leaf hold them), or not ours
    try:
        return set((base / "cgroup.subtree_control").read_text().split()) & set(CAPS)
    except OSError:
        return set()


POOL_LEAF = "ampquiz-pool"
"""The child of its own cgroup that the pool moves that cgroup's processes into (see below)."""


def _leaf_off(own: Path) -> bool:
    """Moves every process of `own` into its child POOL_LEAF, then turns the caps on for `own`'s
    children: what a cgroup v2 service given its own cgroup is meant to do (systemd's
    Delegate=). The processes stay inside `own`, and so under every limit set on it."""
    try:
        if not set(CAPS) <= set((own / "cgroup.controllers").read_text().split()):
            return False  # not given to `own` at all: nothing done here can turn them on
        leaf = own / POOL_LEAF
        leaf.mkdir(exist_ok=True)
        for pid in (own / "cgroup.procs").read_text().split():
            try:
                (leaf / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # ended meanwhile
    except OSError:
        return False
    return _delegate(own) == set(CAPS)


def unified_base(own: Path) -> Path | None:
    """Where run cgroups are made on cgroup v2. A v2 cgroup that holds processes cannot give its
    children the memory or pids controller, and a server or a container's init usually sits in
    its own: on an H200 host it did, and every run went uncapped (a CUDA run has no address-space
    rlimit, so that left its memory uncapped). In order:

    1. this process's own cgroup, where it can turn the caps on for children;
    2. the cgroup a pool before this one left its processes' leaf in (this process started in
       that leaf: it is the server's, or a child of a process that was moved there);
    3. its own cgroup again, once its processes are moved into a leaf (`_leaf_off`);
    4. the nearest writable cgroup above it that can: a run cgroup there is not counted against
       a limit set on the pool's own (a systemd unit's MemoryMax=, say), and another pool may
       share that parent; still better than runs with no caps at all.

    None where nothing is writable; the first writable one where none has every cap."""
    own_writable = writable_dir(own) is not None
    if own_writable and _delegate(own) == set(CAPS):
        return own
    parent = own.parent
    if (own.name == POOL_LEAF and parent.is_relative_to(ROOT) and writable_dir(parent) is not None
            and _delegate(parent) == set(CAPS)):  # fmt: skip
        return parent
    if own_writable and own.name != POOL_LEAF and _leaf_off(own):
        return own
    writable = None
    for base in (own, *(p for p in own.parents if p.is_relative_to(ROOT))):
        if writable_dir(base) is None:
            continue
        writable = writable or base
        if _delegate(base) == set(CAPS):
            return base
    return writable
