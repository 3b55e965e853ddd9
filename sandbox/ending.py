"""How a run ended, as facts its snippet cannot write: the exit status the kernel holds.

The runner's report (status, exception, warnings, explanation) travels on a socket the snippet can
write to: the snippet runs in the runner's own process, so it can find that socket (its descriptor
is in /proc/self/fd) and write anything there, and no arrangement inside one process prevents it
(a filter that stopped the snippet's writes would stop the runner's too; a secret the runner
holds is in memory the snippet can read). So the report is a *claim*, and the pool checks it
against what the snippet cannot forge: how the process ended, read from the kernel by the zygote
(which reaps the runner) or by the pool itself (`exit_status_while_exiting`).

The convention: after a clean finish the runner reports, then exits with the code of the status it
reported -- `EXIT_CODES` -- and with `CRASH_EXIT` after reporting a failure of its own. So:

- a report saying "raised AssertionError" from a process that then exited with the ok-code (the
  snippet wrote a forged report and returned normally, and the runner's true report followed) is a
  contradiction, and so is an "ok" report from a process that exited with the raised-code;
- a report from a process that was then killed (a signal, the OOM killer, the CPU limit) counts
  for nothing: the observed ending decides;
- a report followed by a process that does not end (the snippet forged it, then kept running)
  is not believed until the process ends: the wall-time limit decides.

What the convention cannot close: a snippet that controls its own process can write a forged
report *and then* call os._exit with the matching code. Such a run claims exactly what it could
have produced honestly (it could have raised that exception itself), so verdicts that rest on "did
the code raise X" stay as trustworthy as the code is; what it can fake beyond that is the
exception's text and the explanation, which are bounded and shape-checked (`sandbox.claims`) and
never decide a status. Everything else a verdict rests on -- stdout and stderr (pipes), the exit
status or signal, CPU time, the OOM count, wall time -- never passes through the snippet's hands.

Runs in: the runner (chooses its exit code) and the server (reads how the runner ended).
"""

from __future__ import annotations

import os

EXIT_CODES = {"ok": 80, "error": 81, "memory": 82, "unavailable": 83}
"""Exit code after a report of each status. Not 0: an exit status of 0 is also what the kernel
shows for a process that has not set one yet (see `exit_status_while_exiting`)."""
CRASH_EXIT = 70
"""Exit code after the runner reported a failure of its own (a "crash" message)."""
CLAIMABLE = tuple(EXIT_CODES)
"""The only statuses a report may claim: timeout, output_limit and killed are observed, never told."""

_PF_EXITING = 0x4


def watch(pid: int) -> int | None:
    """A handle on the runner's /proc/PID/stat, opened while it waits for code. It stays bound to
    that process: once the process is gone, reads fail rather than describe a reused pid."""
    try:
        return os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def exit_status_while_exiting(handle: int | None) -> int | None:
    """The wait status of the watched process once it is exiting, as the kernel holds it
    (/proc/PID/stat, field 52); None while it still runs (any thread of it: field 20), or where the
    kernel will not say.

    The kernel sets it at the start of exit, before it tears down the address space (about 2 ms
    for a process that mapped torch, then about 1 ms of namespaces and cgroup), so the pool
    learns how a run ended without waiting for the zygote to reap it. Reading it takes ptrace
    rights over the runner (root with CAP_SYS_PTRACE); without them the field reads 0, and the
    pool waits for the zygote's word instead. 0 is never trusted: it is also the value before the
    kernel sets it, and no runner exit code is 0.
    """
    if handle is None:
        return None
    try:
        data = os.pread(handle, 4096, 0)
        fields = data[data.rindex(b")") + 2 :].split()  # from the third on: state, ppid, ...
        if not int(fields[6]) & _PF_EXITING:
            return None
        # Those are the main thread's: it can end alone (SYS_exit, not exit_group) with a code of
        # its choosing while another thread runs on. The process has ended when one thread is
        # left to count (the exiting main thread itself).
        if int(fields[17]) > 1:
            return None
        status = int(fields[49])
    except (OSError, ValueError, IndexError):
        return None
    return status if status and os.WIFEXITED(status) else None
