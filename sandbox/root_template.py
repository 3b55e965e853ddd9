"""One allow-listed root for every run, built once: a mount namespace the zygote keeps and each
runner copies, instead of each runner building the same root again.

Building a run's root (`sandbox.filesystem`) takes about 30 mount calls, a pivot_root and the
unmounting of the host's tree: ~3.5 ms of CPU in every runner, the largest part of its set-up once
torch's warm-up moved to the zygote. All of that root but five folders is the same for every run,
and read-only. So the zygote has it built once, by a helper process in a mount namespace of its
own, and keeps a handle on that namespace after the helper exits. A runner enters it (`setns`) and
at once copies it (`unshare`): a mount tree of its own, where it mounts what is its own -- a fresh
/proc of its pid namespace, /tmp, /var/tmp, /dev/shm, and /etc (passwd and group name its uid).

What runners share is what each of them built for itself before, identically: read-only binds of
system and package folders, the /dev nodes, the root's small tmpfs; every mount of it read-only
and private, so nothing a runner mounts reaches the template or another run. A runner never
mounts anything inside the template itself: if it cannot make its copy it stops.

Where the host refuses any step (no mount namespace, no fresh proc, no pivot_root) there is no
template, and each runner builds its own root as before; so too on a CUDA host, where the driver's
device nodes can appear after the zygote starts (/dev/nvidia-uvm, on first use).

Runs in: the zygote (`build`: its helper does the mounting) and the runner (`enter`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from sandbox import filesystem
from sandbox.isolation import (
    CLONE_NEWNS,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    mount,
    set_namespace,
    unshare,
)

_PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC
_OWN_TMP = ("/tmp", "/var/tmp")


@dataclass(frozen=True)
class RootTemplate:
    fd: int
    """The zygote's handle on the namespace (it lives as long as a handle on it does)."""
    protections: tuple[str, ...]
    """What the root gives every run (allow-listed filesystem, minimal /dev, hidden paths, ...)."""
    etc: dict[str, bytes | str] = field(default_factory=dict)
    """The host's /etc files a run sees besides the generated ones: contents, or a link's target."""
    kept_in_tmp: tuple[str, ...] = ()
    """Allowed folders under /tmp or /var/tmp (a checkout or a virtual environment there): a run's
    own tmpfs would cover them, so each run binds them again on top of it."""


class NotIsolated(RuntimeError):
    """The runner entered the template but could not make its own copy: it must stop, never
    mount anything where every run would see it."""


def _etc_snapshot() -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for path in filesystem.SYSTEM_FILES:
        name = os.path.basename(path)
        try:
            if os.path.islink(path):
                found[name] = os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    found[name] = f.read()
        except OSError:
            pass
    return found


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def build(
    allowed: list[str], hide: list[str], *, tmp_bytes: int, cuda: bool
) -> RootTemplate | None:
    """The template, or None where the host refuses a step. Called by the zygote before it serves."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: makes the namespace, says what it holds, waits to be let go
        code = 1
        try:
            os.close(ready_r)
            os.close(go_w)
            unshare(CLONE_NEWNS)
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            done = filesystem.build_and_pivot(
                allowed, hide, uid=None, tmp_bytes=tmp_bytes, cuda=cuda
            )
            # Read-only filesystems too, not only read-only mounts: every run's copy shares them.
            mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
            # Each run mounts a fresh proc here: a host that refuses that gets no template.
            mount("proc", "/proc", "proc", _PROC_FLAGS)
            filesystem.unmount("/proc")
            os.write(ready_w, json.dumps(done).encode())
            os.close(ready_w)
            os.read(go_r, 1)
            code = 0
        except BaseException:  # noqa: BLE001, S110 - the zygote reads an empty pipe as "no template"
            pass
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(go_r)
    try:
        said = _read_all(ready_r)
        fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC) if said else None
    except OSError:
        fd = None
    finally:
        os.close(ready_r)
        os.close(go_w)  # the helper exits; the namespace lives on through `fd`
        os.waitpid(pid, 0)
    if fd is None:
        return None
    return RootTemplate(fd, tuple(json.loads(said)), _etc_snapshot(), _kept_in_tmp(allowed))


def _kept_in_tmp(allowed: list[str]) -> tuple[str, ...]:
    resolved = {os.path.realpath(p) for p in allowed if os.path.exists(p)}
    return tuple(
        filesystem.outermost({p for p in resolved if any(p.startswith(t + "/") for t in _OWN_TMP)})
    )


def enter(template: RootTemplate, *, uid: int, tmp_bytes: int) -> list[str]:
    """Make this runner's own copy of the template and mount its own folders in it; returns the
    protections in force. OSError: not entered, this process's view is as it was. NotIsolated:
    entered but not copied (the runner must stop)."""
    set_namespace(template.fd, CLONE_NEWNS)  # now at the template's root, in the template itself
    try:
        unshare(CLONE_NEWNS)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        raise NotIsolated(f"could not copy the runs' root template: {exc}") from exc
    try:
        proc = filesystem.mount_proc(
            "/proc", _PROC_FLAGS, pids_only=True
        )  # templates are made on CPU hosts only
        kept = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in template.kept_in_tmp}
        tmp = filesystem.tmp_options(tmp_bytes)
        for folder in _OWN_TMP:
            mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, tmp)
        # Read-only, on top of the tmpfs, with what the template mounted inside them (the covers
        # of hidden paths: the server's data folder in a checkout under /tmp stays hidden).
        for path, handle in kept.items():
            os.makedirs(path, mode=0o755, exist_ok=True)
            filesystem.bind_read_only(handle, path)
            os.close(handle)
        mount("tmpfs", "/dev/shm", "tmpfs", _PROC_FLAGS, tmp)
        _own_etc(template.etc, uid)
    except OSError as exc:  # a copy of the template with a folder missing: not a run's root
        raise NotIsolated(f"could not mount a run's own folders: {exc}") from exc
    return ["mount-namespace", *template.protections, *proc, "private-tmp"]


def _own_etc(host_files: dict[str, bytes | str], uid: int) -> None:
    size = 64 * 1024 + sum(len(v) for v in host_files.values())
    mount("tmpfs", "/etc", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=755")
    for name, text in filesystem.etc_files(uid).items():
        with open(f"/etc/{name}", "w") as f:
            f.write(text)
    for name, content in host_files.items():
        if isinstance(content, str):
            os.symlink(content, f"/etc/{name}")
        else:
            with open(f"/etc/{name}", "wb") as f:
                f.write(content)
    mount(None, "/etc", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
