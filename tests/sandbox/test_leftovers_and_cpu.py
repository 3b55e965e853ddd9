"""Nothing of a run outlives it (no process, no cgroup), and a run gets about its share of the CPU
however many processes it forks. Each test is a real run, then a normal run that still works.
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sandbox import Limits, RunResult, Sandbox
from tests.support.pool import assert_still_works
from tests.support.processes import eventually_empty, processes_of_runs, processes_with_argument

CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_dirs_of(pid: int) -> list[Path]:
    """The host folders of the run cgroups `pid` is in (v1: one per controller; v2: one)."""
    dirs = []
    for line in (Path("/proc") / str(pid) / "cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "ampquiz-run-" in path:
            hierarchy = (
                CGROUP_ROOT / controllers.split(",")[0].removeprefix("name=")
                if controllers
                else CGROUP_ROOT
            )
            dirs.append(hierarchy / path.lstrip("/"))
    return dirs


def test_nothing_outlives_a_run_not_even_what_blocks_in_the_kernel(sb: Sandbox) -> None:
    """What a snippet leaves behind: a child blocked in the kernel (opening a FIFO nobody writes),
    a stopped one, one in a session of its own that ignores SIGTERM. A FUSE mount served by the
    snippet itself (a process stuck in D state) is out of reach: no mounts, no user namespaces and
    no /dev/fuse (test_syscall_filter, test_filesystem_view)."""
    result: list[RunResult] = []
    code = textwrap.dedent("""
        import os, signal, time
        os.mkfifo("/tmp/fifo")
        if os.fork() == 0:
            os.execv("/bin/cat", ["cat", "/tmp/fifo", "765431"])  # blocks in open(2)
        stopped = os.fork()
        if stopped == 0:
            os.execv("/bin/sleep", ["sleep", "765432"])
        while b"765432" not in open(f"/proc/{stopped}/cmdline", "rb").read():
            time.sleep(0.001)  # stopped once it is sleep, not before its exec
        os.kill(stopped, signal.SIGSTOP)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                os.execv("/bin/sleep", ["sleep", "765433"])
            os._exit(0)
        time.sleep(1.0)
        print("left them")
    """)
    run = threading.Thread(target=lambda: result.append(sb.run(code)))
    run.start()
    markers = ["765431", "765432", "765433"]
    deadline = time.monotonic() + 20
    while not all(processes_with_argument(m) for m in markers) and time.monotonic() < deadline:
        time.sleep(0.02)
    found = {m: processes_with_argument(m) for m in markers}
    assert all(found.values()), (found, result)
    cgroups = cgroup_dirs_of(found["765433"][0])
    assert cgroups and all(d.is_dir() for d in cgroups), cgroups
    run.join()
    assert result[0].status == "ok" and result[0].stdout == "left them\n", result[0]
    for m in markers:
        assert eventually_empty(lambda m=m: processes_with_argument(m)) == [], m
    assert eventually_empty(lambda: [d for d in cgroups if d.exists()]) == []
    assert sb.zygote is not None
    assert eventually_empty(lambda: processes_of_runs(sb.zygote.pid, runners=False)) == []
    assert_still_works(sb)


SPIN = """
import os, time
children, wall = {children}, 1.5
r, w = os.pipe()
for _ in range(children):
    if os.fork() == 0:
        os.setsid()
        end = time.monotonic() + wall
        while time.monotonic() < end:
            pass
        t = os.times()
        os.write(w, f"{{t.user + t.system}}\\n".encode())
        os._exit(0)
start = time.monotonic()
for _ in range(children):
    os.wait()
elapsed = time.monotonic() - start
os.close(w)
print(round(sum(float(x) for x in os.read(r, 65536).split()) / elapsed, 2))
"""


def test_many_spinning_children_share_one_core(sb: Sandbox) -> None:
    """24 forked children calling setsid() and spinning slowed a concurrent learner's run ~8x:
    now they share `Limits.cpu_cores` (1 by default), whatever the host has."""
    r = sb.run(SPIN.format(children=8))
    assert r.status == "ok", r
    assert "cpu-cap" in r.environment.protections
    assert float(r.stdout) <= 1.25, f"{r.stdout.strip()} cores used"
    assert_still_works(sb)


def test_cpu_cores_sets_the_share(sb: Sandbox) -> None:
    r = sb.run(SPIN.format(children=2), limits=Limits(cpu_cores=0.5))
    assert r.status == "ok", r
    assert float(r.stdout) <= 0.7, f"{r.stdout.strip()} cores used"
    assert_still_works(sb)


def _cpu_weight(cgroup: Path) -> str | None:
    for name in ("cpu.weight", "cpu.shares"):  # v2, v1
        if (cgroup / name).exists():
            return (cgroup / name).read_text().strip()
    return None


def test_runners_being_prepared_cant_take_the_cpu_from_a_run(sb: Sandbox) -> None:
    """Runners are prepared (replacing the one a run took) while runs execute and their results
    are delivered: until a runner is handed code its cgroup has a small CPU weight, and the run's
    own cgroup the kernel's default, so a run competes as any process would and preparation takes
    what is left."""
    assert sb.zygote is not None
    result: list[RunResult] = []
    code = 'import os, time\nif os.fork() == 0:\n    os.execv("/bin/sleep", ["sleep", "765441"])\ntime.sleep(1.5)\n'
    run = threading.Thread(target=lambda: result.append(sb.run(code)))
    run.start()
    deadline = time.monotonic() + 20
    while not processes_with_argument("765441") and time.monotonic() < deadline:
        time.sleep(0.02)
    found = processes_with_argument("765441")
    assert found, result
    # Read while the run lives: once its result is in, its cgroup is removed.
    running = {
        str(d): _cpu_weight(d) for d in cgroup_dirs_of(found[0]) if _cpu_weight(d) is not None
    }
    assert running, "the run's cgroup has no CPU weight to read"
    prepared = [
        d / c.name
        for d in {Path(r).parent for r in running}
        for c in d.glob(f"ampquiz-run-{sb.zygote.pid}-*")
        if str(d / c.name) not in running
    ]
    weights = {str(d): _cpu_weight(d) for d in prepared if d.exists()}
    run.join()
    assert result[0].status == "ok", result[0]
    assert set(running.values()) <= {"100", "1024"}, running  # the kernel's defaults
    assert {"11", "110"} & set(weights.values()), weights  # the spare runners, prepared meanwhile


def test_a_snippet_runs_at_the_servers_priority_and_ctrl_c_is_its_own(sb: Sandbox) -> None:
    """The zygote forks at a higher nice value and ignores SIGINT (the server stops it): neither
    reaches a snippet, which gets the server's nice value and Python's own SIGINT handler."""
    r = sb.run(
        "import os, signal\n"
        "print(os.getpriority(os.PRIO_PROCESS, 0), signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    assert r.status == "ok", r
    assert r.stdout == f"{os.getpriority(os.PRIO_PROCESS, 0)} True\n", r


def test_ctrl_c_cant_stop_the_zygote_the_server_stops_it(sb: Sandbox) -> None:
    """Ctrl+C in `ampquiz serve` reaches the zygote too (one foreground process group): it printed
    a KeyboardInterrupt traceback and died. It ignores SIGINT; the server shuts the pool down."""
    assert sb.zygote is not None
    zygote = sb.zygote
    os.kill(zygote.pid, signal.SIGINT)
    for _ in range(2 * (sb.workers + 1)):  # past every runner prepared before the signal
        assert_still_works(sb)
    assert sb.zygote is zygote and zygote.poll() is None


def _prepared_runners(sb: Sandbox) -> int:
    assert sb.zygote is not None
    return len(processes_of_runs(sb.zygote.pid))


def test_a_used_runner_is_replaced_only_after_its_result_is_delivered(sb: Sandbox) -> None:
    """A worker still sends a run's result over the network when the run returns; preparing the
    runner's replacement meanwhile slowed both the run and the delivery. Inside `results_first`
    the pool runs on its spare and prepares the replacement when the block ends; outside one, as
    soon as the run returns."""
    full = sb.workers + 1
    deadline = time.monotonic() + 60
    while _prepared_runners(sb) < full and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _prepared_runners(sb) == full
    with sb.results_first():
        assert sb.run("print(1)").stdout == "1\n"
        time.sleep(1.0)  # far longer than preparing one takes: nothing was asked for yet
        delivering = _prepared_runners(sb)
    while _prepared_runners(sb) < full and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (delivering, _prepared_runners(sb)) == (full - 1, full)
    assert sb.run("print(2)").stdout == "2\n"  # outside a block: replaced at once, as before
    while _prepared_runners(sb) < full and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _prepared_runners(sb) == full


def test_a_runs_own_folders_hold_a_bounded_number_of_files(sb: Sandbox) -> None:
    """Their size capped the bytes, not the count: a run made 150,000 empty files, whose teardown
    after the result took seconds of the host's CPU and outlasted the wait for its cgroup (left
    behind, one a run). Each holds at most TMP_INODES files now."""
    from sandbox.filesystem import TMP_INODES

    r = sb.run(
        textwrap.dedent(f"""
        import errno, os
        for folder in ("/tmp", "/var/tmp", "/dev/shm"):
            made = 0
            try:
                for made in range({TMP_INODES + 100}):
                    open(f"{{folder}}/f{{made}}", "w").close()
            except OSError as exc:
                print(folder, errno.errorcode[exc.errno], made <= {TMP_INODES})
            else:
                print(folder, "made them all")
    """),
        Limits(wall_s=60, cpu_s=60),
    )
    assert r.stdout.splitlines() == [
        "/tmp ENOSPC True",
        "/var/tmp ENOSPC True",
        "/dev/shm ENOSPC True",
    ], r
    assert_still_works(sb)


def test_a_sweep_leaves_a_living_pools_cgroups_and_a_slow_removal_is_tried_again() -> None:
    """On cgroup v1 the pids and cpu folders are shared by every pool on the host: a zygote's
    sweep at start removed another pool's empty run cgroup (one just made for a runner about to
    join it). A removal that outlasts its wait was given up, one cgroup leaked a run for good."""
    import subprocess

    from sandbox import cgroup

    factory = cgroup.CgroupFactory()
    if not factory.available:
        pytest.skip("no cgroup this test process may create here")
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive_name, dead_name = (
        f"ampquiz-run-{os.getpid()}-0-sweeptest",
        f"ampquiz-run-{dead.pid}-0-sweeptest",
    )
    made = [base / name for base in factory.bases.values() for name in (alive_name, dead_name)]
    for d in made:
        d.mkdir()
    try:
        factory.sweep()
        assert all(d.exists() == (d.name == alive_name) for d in made), [
            (d, d.exists()) for d in made
        ]
    finally:
        for d in made:
            if d.exists():
                d.rmdir()

    base = next(iter(factory.bases.values()))
    busy = base / f"ampquiz-run-{os.getpid()}-1-busytest"
    (busy / "child").mkdir(parents=True)  # a cgroup folder with a child cannot be removed yet
    try:
        cgroup.RunCgroup({"x": busy}).remove()
        assert busy.exists() and busy in cgroup._LEFT_BEHIND
        (busy / "child").rmdir()
        cgroup.RunCgroup({}).remove()  # the next removal of any run tries it again
        assert not busy.exists() and busy not in cgroup._LEFT_BEHIND
    finally:
        if (busy / "child").exists():
            (busy / "child").rmdir()
        if busy.exists():
            busy.rmdir()


def test_once_runners_join_cgroups_one_that_cannot_is_refused_not_run_uncapped() -> None:
    """A host out of cgroups (65,535 memory cgroups on v1, say) made every later run go on
    without its memory, process and CPU caps, said only by their absence from `protections`. A
    pool none of whose runners ever joined one (a host that gives none) still runs them."""
    import socket

    from sandbox import SandboxError, wire
    from sandbox.slot import Slot

    pool = Sandbox(workers=1)  # not started: only its reading of a runner's first messages is used
    for joined_before in (False, True):
        pool._cgroups_work = joined_before
        ours, theirs = socket.socketpair()
        slot = Slot(pid=os.getpid(), sock=ours, out_fd=-1, err_fd=-1)
        wire.send(theirs, {"type": "hello", "cgroup": None})
        wire.send(theirs, {"type": "ready", "environment": {}})
        try:
            if joined_before:
                with pytest.raises(SandboxError, match="could not make its cgroup"):
                    pool._wait_until_ready(slot)
            else:
                pool._wait_until_ready(slot)
                assert slot.environment == {} and slot.cgroup is None
        finally:
            if slot.watch is not None:
                os.close(slot.watch)
            ours.close()
            theirs.close()
