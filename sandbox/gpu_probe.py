"""What the zygote must know of the GPU (is there one, its name, where its driver's libraries
are), asked in a child process that it forks and waits for.

Runs in: a short-lived child of the zygote, before any runner exists. The zygote itself must never
start CUDA (a child of a process that did cannot use it) and should stay single-threaded (every
runner is a fork of it): asking NVML in the zygote, as `torch.cuda.is_available()` does with
PYTORCH_NVML_BASED_CUDA_CHECK set, left a second thread in it on an H200 host. Whatever the
libraries load or start, they do it in the child, which then exits.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import TypedDict, cast

DRIVER_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")


class GpuInfo(TypedDict):
    cuda: bool
    device_name: str
    driver_dirs: list[str]


NO_GPU: GpuInfo = {"cuda": False, "device_name": "", "driver_dirs": []}


def probe() -> GpuInfo:
    """{"cuda": bool, "device_name": str, "driver_dirs": [folders]}; no GPU if the child fails."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: ask, write the answer, leave without running any exit handler
        try:
            os.close(r)
            os.write(w, json.dumps(_ask()).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    try:
        found = json.loads(b"".join(chunks))
    except ValueError:
        return NO_GPU.copy()
    # The child wrote `_ask()`'s answer.
    return cast(GpuInfo, {**NO_GPU, **found}) if isinstance(found, dict) else NO_GPU.copy()


def _ask() -> GpuInfo:
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # NVML, not the CUDA runtime: nothing starts
    import torch

    if not torch.cuda.is_available():
        return NO_GPU.copy()
    return {"cuda": True, "device_name": _gpu_name(), "driver_dirs": _driver_dirs()}


def _gpu_name() -> str:
    """GPU 0's name as NVML (and `nvidia-smi`) gives it; empty where NVML cannot say, and each
    runner then reports the name CUDA gives it."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return ""
        handle = ctypes.c_void_p()
        name = ctypes.create_string_buffer(96)
        if nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
            return ""
        if nvml.nvmlDeviceGetName(handle, name, len(name)) != 0:
            return ""
        return name.value.decode(errors="replace")
    except (OSError, AttributeError):
        return ""


def _driver_dirs() -> list[str]:
    """The folders the driver's libraries load from. A container runtime may mount the driver
    outside the system folders (/usr/local/nvidia/lib64, found through LD_LIBRARY_PATH), and a
    runner that starts CUDA inside its own root must find it there."""
    for name in DRIVER_LIBRARIES:
        try:
            ctypes.CDLL(name)  # loading starts nothing; `cuInit` would
        except OSError:
            pass
    found = set()
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address, perms, offset, dev, inode, then the path if any
        path = fields[5].strip() if len(fields) == 6 else ""
        if "/libcuda.so" in path or "/libnvidia-" in path:
            found.add(str(Path(path).resolve().parent))
    return sorted(found)
