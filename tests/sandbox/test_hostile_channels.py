"""A snippet against the sandbox's own machinery and the host's local services.

Each is a real run followed by a normal run that still works.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox
from sandbox.collect import collect
from sandbox.pidfd_kill import kill_members
from sandbox.slot import Slot
from tests.support.pool import assert_still_works
from tests.support.processes import eventually_empty, processes_of_runs, processes_with_argument

REPO = Path(__file__).resolve().parents[2]

# Finds the descriptors a snippet inherited that are sockets: the sandbox's report channel.
FIND_SOCKETS = """
import os, stat, socket, struct, json
socks = []
for name in os.listdir("/proc/self/fd"):
    try:
        if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
            socks.append(socket.socket(fileno=os.dup(int(name))))
    except OSError:
        pass
"""


@pytest.fixture
def unix_listener():
    """A local service listening on a Unix socket, as a database or broker does under /run."""
    folder = Path("/run/ampquiz-test-service")
    folder.mkdir(exist_ok=True)
    path = folder / "service.sock"
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen()
    yield path
    server.close()
    path.unlink(missing_ok=True)
    folder.rmdir()


def test_cant_reach_local_services_over_unix_sockets(sb: Sandbox, unix_listener: Path) -> None:
    targets = [
        str(unix_listener),
        "/run/postgresql/.s.PGSQL.5432",
        "/var/run/postgresql/.s.PGSQL.5432",
    ]
    r = sb.run(
        textwrap.dedent(f"""
        import socket
        for path in {targets!r}:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(path)
                print("connected", path)
            except OSError:
                print("refused")
    """)
    )
    assert r.status == "ok", r
    assert r.stdout == "refused\n" * 3
    assert_still_works(sb)


def test_cant_write_to_world_writable_host_folders(sb: Sandbox) -> None:
    r = sb.run(
        textwrap.dedent("""
        for path in ["/run/lock/left.txt", "/var/lock/left.txt", "/left.txt", "/var/local/left.txt"]:
            try:
                open(path, "w").write("x")
                print("wrote", path)
            except OSError:
                print("denied")
    """)
    )
    assert r.stdout == "denied\n" * 4, r
    assert not Path("/run/lock/left.txt").exists()
    assert "read-only-root" in r.environment.protections


def test_cant_take_a_name_among_the_hosts_abstract_sockets(sb: Sandbox) -> None:
    """The report channel was made in the host's network namespace: a name bound to it would be
    the host's (and could be the one a host service is about to take)."""
    r = sb.run(
        FIND_SOCKETS
        + textwrap.dedent("""
        for s in socks:
            try:
                s.bind("\\0ampquiz-squat")
                print("bound")
            except OSError:
                print("refused")
    """)
    )
    assert r.status == "ok" and set(r.stdout.split()) == {"refused"}, r
    assert "@ampquiz-squat" not in Path("/proc/net/unix").read_text()
    assert_still_works(sb)


def test_junk_on_the_report_channel_cannot_hold_a_worker_past_wall_time(sb: Sandbox) -> None:
    started = time.monotonic()
    r = sb.run(
        FIND_SOCKETS
        + textwrap.dedent("""
        fake = json.dumps({"type": "result", "status": "ok", "message": "all fine"}).encode()
        junk = json.dumps({"type": "noise"}).encode()
        for s in socks:
            s.sendall(struct.pack("!I", len(fake)) + fake)
        while True:
            for s in socks:
                s.sendall(struct.pack("!I", len(junk)) + junk)
    """),
        limits=Limits(wall_s=2, cpu_s=30),
    )
    # The wall-time limit (2 s) holds; the slack is for a loaded CI machine, not a speed target.
    assert time.monotonic() - started < 6, r
    assert r.duration_ms < 5000
    assert_still_works(sb)


@pytest.mark.parametrize(
    "payload",
    ["struct.pack('!I', 2**31)", "struct.pack('!I', 3) + b'xyz'", "struct.pack('!I', 2) + b'[]'"],
    ids=["huge-header", "not-json", "not-an-object"],
)
def test_malformed_report_is_a_result_not_a_crash(sb: Sandbox, payload: str) -> None:
    r = sb.run(
        FIND_SOCKETS + f"for s in socks:\n    s.sendall({payload})\nimport time\ntime.sleep(1)\n"
    )
    assert r.status in ("killed", "ok"), r
    r.to_json()
    assert_still_works(sb)


def test_odd_exception_texts_still_serialise(sb: Sandbox) -> None:
    r = sb.run("raise ValueError('bad \\udc80 byte' + 'x' * 5_000_000)")
    assert r.status == "error" and r.exception.type == "ValueError"
    assert len(r.exception.message) < 100_000 and "more characters" in r.exception.message
    assert "\\udc80" in r.to_json()
    r = sb.run(
        "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()"
    )
    assert r.status == "error" and r.exception.type == "E", r


@pytest.mark.own_pool  # about the pool's own lifecycle: it kills the zygote
def test_pool_recovers_when_its_zygote_dies() -> None:
    with Sandbox(workers=1) as pool:
        assert pool.run("print(1)").stdout == "1\n"
        assert pool.zygote is not None
        os.kill(pool.zygote.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        outcomes = []
        while time.monotonic() < deadline:
            r = pool.run("print(2)")
            outcomes.append(r.status)
            if r.status == "ok" and pool.alive:
                break
        assert pool.alive and outcomes[-1] == "ok", outcomes
        assert pool.run("print(3)").stdout == "3\n"


def test_a_runner_gone_with_its_code_unread_is_a_result_not_a_crash() -> None:
    """A runner killed (with its zygote, say) before it read the code leaves the pool's end of the
    socket reset rather than closed: still a run that ended, never an exception in the pool."""
    stand_in = subprocess.Popen(["sleep", "30"], start_new_session=True)  # the runner's process
    pool_end, runner_end = socket.socketpair()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    os.close(out_w)
    os.close(err_w)
    slot = Slot(stand_in.pid, pool_end, out_r, err_r)
    dies = threading.Timer(0.3, runner_end.close)  # the code sits unread in its socket
    dies.start()
    try:
        r = collect(slot, "print(1)", Limits(wall_s=5), explain=False)
    finally:
        dies.join()
        slot.close()
        stand_in.wait(timeout=10)
    assert r.status == "killed" and "without reporting" in r.message, r


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here")
def test_killing_a_run_that_already_ended_never_reaches_a_process_that_took_its_number() -> None:
    """The pool kills a runner after the zygote may have reaped it, and a busy host hands its pid
    to a new process within seconds: the kill goes by the runner's pidfd, never by its number."""
    ended = subprocess.Popen(["sleep", "30"], start_new_session=True)  # the runner that ended
    handle = os.pidfd_open(ended.pid)
    ended.kill()
    ended.wait()  # reaped: its number is free
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)  # took the number, say
    pool_end, _runner_end = socket.socketpair()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for fd in (out_w, err_w):
        os.close(fd)
    for protections in (["pid-namespace"], []):  # with no pid namespace its session is killed too
        slot = Slot(
            bystander.pid,
            pool_end,
            out_r,
            err_r,
            pidfd=handle,
            environment={"protections": protections},
        )
        slot.kill()
        time.sleep(0.1)
        assert bystander.poll() is None, "the kill reached the process that reused the runner's pid"
    slot.close()
    bystander.kill()
    bystander.wait()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here")
def test_emptying_a_cgroup_kills_its_members_and_no_process_that_took_a_members_number() -> None:
    """A pid read from cgroup.procs may be another process's by the kill: only those still
    members once a pidfd holds them are killed."""
    member, bystander = (subprocess.Popen(["sleep", "30"]) for _ in range(2))
    try:
        # the bystander's number was read from the cgroup, but it is no member (any more)
        kill_members({member.pid, bystander.pid}, lambda: {member.pid})
        assert member.wait(timeout=5) == -signal.SIGKILL
        time.sleep(0.1)
        assert bystander.poll() is None
    finally:
        for p in (member, bystander):
            p.kill()
            p.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping capabilities takes root")
def test_a_host_that_refuses_what_a_runner_needs_gets_a_clear_error_not_a_hang() -> None:
    """Root without any capability (a container run with every capability dropped) cannot hand a
    run its own uid: starting the pool says so within its time limit, and leaves nothing behind.
    The 5 s are the runners' alone: the zygote's start (importing torch) has a budget of its own,
    which a busy host may need."""
    start = "from sandbox import Sandbox\nSandbox(workers=1, start_timeout_s=5, zygote_timeout_s=80).start()"
    out = subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c", start],
        cwd=REPO, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "no sandbox runner became ready in 5 s" in out.stderr, out.stderr[-2000:]
    assert "PermissionError: [Errno 1] Operation not permitted" in out.stderr, out.stderr[-2000:]


def test_a_run_dies_with_the_server_that_started_it(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
            import sys
            from sandbox import Sandbox, Limits
            with Sandbox(workers=1) as sb:
                print("ready", flush=True)
                print(sb.zygote.pid, flush=True)
                sb.run("import os, time\\nif os.fork() == 0:\\n    os.execv('/bin/sleep', ['sleep', '876123'])\\n"
                       "while True:\\n    time.sleep(1)", limits=Limits(wall_s=300))
        """),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout.readline() == "ready\n"
    zygote = int(server.stdout.readline())
    deadline = time.monotonic() + 20
    while not processes_with_argument("876123") and time.monotonic() < deadline:
        time.sleep(0.05)  # until the snippet sleeps in its runner, as the run's own uid
    assert processes_with_argument("876123"), "the run should be in flight"
    assert processes_of_runs(zygote)
    server.kill()
    server.wait()
    assert eventually_empty(lambda: processes_of_runs(zygote)) == []
    assert eventually_empty(lambda: processes_with_argument("876123")) == []
