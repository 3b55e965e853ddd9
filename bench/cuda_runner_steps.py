"""On a CUDA host: which of a runner's steps after starting CUDA leaves CUDA unusable.

A runner enters its namespaces and root, drops to an unprivileged uid, starts CUDA
(`sandbox.runner.warm_up_first_ops`), closes descriptors, loads the syscall filter and lowers its
rlimits, and its cgroup's caps are written; only then does the snippet use CUDA. (Until
2026-11-26 it started CUDA as root, before the uid; "uid" below is that order.) On an H200 nearly every snippet's
first CUDA call then failed ("OS call failed or operation not supported on this OS"; in a few an
allocation and a launch still ran), while the same ops ran in the warm-up. Each line here forks a
fresh child of a process that never started CUDA (as the zygote), starts CUDA in it as the runner
does, takes one or more of those steps, and tries the ops a snippet would (a fill, a reduction
read back with .item(), a float16 matmul through cuBLAS, a pinned copy), at once and again after
idling as a prepared runner does. The first step whose line fails is the one to fix; the last line
lists the calls the allow-list would have refused, as the kernel logged them.

Seen on an H200 (torch 2.11.0+cu130, 2026-11-27): every line passed but two. Closing the driver's
descriptors ("close-all": "unspecified launch failure"), and a pid namespace without a /proc of its
own ("pidns" alone: CUDA could not even count the devices, error 304, "OS call failed or operation
not supported on this OS"; a runner mounts its own /proc, and "pidns + root" passed). A runner now
keeps every descriptor starting CUDA opened, and its snippets ran.

Usage (root, on the CUDA host): `python bench/cuda_runner_steps.py` (`--device cpu` runs the same
steps on a CPU host, to check the script itself)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

# The repository instead of bench/ (whose http.py would shadow the standard library's for torch).
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from sandbox import filesystem, gpu_probe, isolation, runner, seccomp, visible
from sandbox.cgroup import CgroupFactory, RunCgroup

UID = 200_777
PR_SET_DUMPABLE = 4
ACT_LOG = 0x7FFC0000  # SECCOMP_RET_LOG: allowed, and the kernel logs the call (dmesg)
IDLE_S = 2.0
DEVICE = "cpu" if "--device=cpu" in sys.argv or sys.argv[-2:] == ["--device", "cpu"] else "cuda"


def _ops() -> str:
    import torch

    got = torch.ones(2, device=DEVICE).sum().item()
    a = torch.randn(64, 64, device=DEVICE).half()
    (a @ a).float().sum().item()
    if DEVICE == "cuda":
        torch.ones(1 << 20).pin_memory().cuda().sum().item()
    return f"ok ({got})"


def _describe_fds(fds: set[int]) -> list[str]:
    out = []
    for fd in sorted(fds):
        try:
            out.append(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            out.append(f"{fd}:?")
    return out


def child(steps: list[str], cgroups: CgroupFactory, report: int) -> None:
    facts: dict = {"steps": steps}
    try:
        cg = (
            cgroups.join(f"ampquiz-steps-{os.getpid()}")
            if cgroups.available and "cgroup" in steps
            else None
        )
        # A narrower /sys than the runners' now.
        if "root-sys-pci" in steps or "root-sys-cpu" in steps:
            pci = tuple(str(p) for p in Path("/sys/devices").glob("pci*"))
            module = tuple(str(p) for p in Path("/sys/module").glob("nvidia*"))
            cpu = (
                "/sys/devices/system/cpu",
                "/sys/devices/system/node",
            )  # the live folders, as CPU hosts had them
            filesystem.SYS_CUDA = (
                (*cpu, "/sys/bus/pci", *pci, *module) if "root-sys-pci" in steps else cpu
            )
            steps = [*steps, "root"]
        if "root" in steps:  # before CUDA starts, as in a runner: its namespaces and its own root
            isolation.enter_namespaces()
            keep = [*visible.allowed_paths(), *gpu_probe.probe()["driver_dirs"]]
            filesystem.allow_listed_root(
                keep, visible.hidden_paths([]), uid=UID, tmp_bytes=64 << 20, cuda=DEVICE == "cuda"
            )
        if "uid-first" in steps:  # as a runner does now: CUDA starts as the run's uid, not root
            isolation.drop_privileges(UID)
        before = isolation.open_fds()
        runner.warm_up_first_ops(DEVICE)
        import torch

        if DEVICE == "cuda":
            torch.cuda.synchronize()
        opened = isolation.open_fds() - before
        facts["threads"] = isolation.threads_held()
        facts["opened_by_cuda"] = _describe_fds(opened)
        for step in steps:
            if step == "uid":
                isolation.drop_privileges(UID)
            elif step == "nondumpable":
                isolation.prctl(PR_SET_DUMPABLE, 0)
            elif step == "dumpable":  # after "uid": setuid left the process undumpable, so its
                # /proc/self files (each thread's comm, which the driver names its threads by)
                # became root's, not writable by the run's uid
                isolation.prctl(PR_SET_DUMPABLE, 1)
            elif step == "close-all":
                isolation.close_fds({report})
            elif step == "close-keep-cuda":
                isolation.close_fds({report, *opened})
            elif step == "seccomp":
                seccomp.prepare()
                seccomp.install(seccomp.PROGRAMS)
            elif step == "allow-list":  # the first filter alone (anything else: ENOSYS)
                seccomp.install(seccomp.compile_filters()[:1])
            elif step == "refusals":  # the second alone (EPERM for what it names)
                seccomp.install(seccomp.compile_filters()[1:])
            # What the allow-list would refuse is let through, and logged.
            elif step == "allow-list-logged":
                lib = seccomp._load_library()
                seccomp.install((seccomp._compile(lib, ACT_LOG, seccomp._allow_list),))
            elif step == "core":
                isolation.no_core_dumps()
            elif step == "rlimits":
                isolation.apply_rlimits(cpu_s=10, file_bytes=16 << 20, open_files=64 + max(opened, default=0),
                                        processes=16 + isolation.threads_held() - 1, memory_bytes=None, vm_bytes=0)  # fmt: skip
            elif step == "memlock-64k":
                resource.setrlimit(resource.RLIMIT_MEMLOCK, (65536, 65536))
            elif step == "cgroup" and cg:
                RunCgroup.from_paths(cg).set_limits(
                    processes=16, memory_bytes=RunCgroup.from_paths(cg).usage_bytes() + (1 << 30)
                )
        try:  # what the driver does when it names a thread it starts
            with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
                comm.write("python")
            facts["comm"] = "writable"
        except OSError as exc:
            facts["comm"] = f"not writable ({exc.strerror})"
        facts["result"] = _ops()
        time.sleep(IDLE_S)  # a prepared runner waits for its code: the driver's threads run on
        facts["result"] += ", after idling: " + _ops()
    except BaseException as exc:  # noqa: BLE001 - the report is the point
        facts["result"] = (
            f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        )
        facts["where"] = traceback.format_exc().splitlines()[-4:-1]
    os.write(report, json.dumps(facts).encode())
    os._exit(0)


VARIANTS = [
    [], ["uid-first"], ["uid"], ["uid", "dumpable"], ["nondumpable"], ["close-all"], ["close-keep-cuda"], ["seccomp"], ["core"], ["rlimits"],
    ["memlock-64k"], ["cgroup"], ["root"], ["allow-list"], ["refusals"], ["allow-list-logged"],
    ["pidns"], ["pidns", "root"], ["pidns", "root", "uid-first"],
    ["root-sys-pci"], ["root-sys-cpu"],  # what of /sys CUDA needs: the PCI tree and the driver's modules, or none of it
    ["cgroup", "root", "uid-first", "close-keep-cuda", "core", "seccomp", "rlimits"],  # the runner's order
    ["pidns", "cgroup", "root", "uid-first", "close-keep-cuda", "core", "seccomp", "rlimits"],  # and its pid namespace
]  # fmt: skip


def main() -> None:
    import torch  # imported, never started here: children start CUDA, as runners do

    print(f"torch {torch.__version__}, uid {os.geteuid()}")
    cgroups = CgroupFactory()
    own_pidns = (
        isolation.open_own_pid_namespace()
    )  # as the zygote keeps it, to return to after each fork
    print(f"kernel {os.uname().release}")
    print(f"cgroup caps: {cgroups.features or 'none'}")
    for steps in VARIANTS:
        r, w = os.pipe()
        # "pidns": forked as a runner is, into a new pid namespace whose pid 1 it is
        in_pidns = (
            "pidns" in steps
            and own_pidns is not None
            and isolation.new_pid_namespace_for_next_child()
        )
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(steps, cgroups, w)
        if in_pidns:
            isolation.enter_pid_namespace_for_children(own_pidns)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        facts = (
            json.loads(data) if data else {"steps": steps, "result": "no report (the child died)"}
        )
        print(
            f"{' + '.join(steps) or 'nothing'}: {facts['result']}  [threads {facts.get('threads')}, "
            f"own thread's comm {facts.get('comm')}]"
        )
        if not steps:
            print("  descriptors CUDA opened:", ", ".join(facts.get("opened_by_cuda", [])))
        for line in facts.get("where", []):
            print("   ", line)
    cgroups.sweep("ampquiz-steps-")
    logged = subprocess.run(
        ["dmesg"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    calls = sorted(
        {
            line.split(" syscall=")[1].split()[0]
            for line in logged
            if "type=1326" in line and " syscall=" in line
        }
    )
    print(
        f"calls outside the allow-list (syscall numbers, from the kernel's log): {', '.join(calls) or 'none logged'}"
    )


if __name__ == "__main__":
    main()
