"""What a snippet sees of the disk: the interpreter, its packages, system libraries and its own temp
folders, and nothing else, wherever the server keeps its bank, records, database or other checkouts.
Each test is a real run, then a normal run that still works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.visible import allowed_paths
from tests.support.pool import assert_still_works

REPO = Path(__file__).resolve().parents[2]
ANSWER = "the-answer-key-is-B"


@pytest.fixture(scope="module")
def outside() -> Iterator[Path]:
    """A server's data where AMPQUIZ_BANK and the database may live: outside the working tree,
    under /srv where the host has one, and not in any `hide` list of the pool."""
    parent = "/srv" if os.access("/srv", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="ampquiz-outside-", dir=parent))
    (root / "bank" / "verified").mkdir(parents=True)
    (root / "bank" / "autocast.yaml").write_text(f"- id: q1\n  answer: {ANSWER}\n")
    (root / "bank" / "verified" / "cpu.json").write_text(f'{{"q1": "{ANSWER}"}}')
    (root / "var").mkdir()
    (root / "var" / "ampquiz.db").write_text(f"learner attempts {ANSWER}")
    checkout = root / "other-checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text(f'[project]\nname = "{ANSWER}"\n')
    yield root
    shutil.rmtree(root)


def run(sb: Sandbox, code: str):
    r = sb.run(textwrap.dedent(code))
    assert r.status == "ok", r
    assert "allow-listed-filesystem" in r.environment.protections
    return r


def test_cant_read_bank_records_or_database_outside_the_working_tree(
    sb: Sandbox, outside: Path
) -> None:
    paths = [
        outside / "bank" / "autocast.yaml",
        outside / "bank" / "verified" / "cpu.json",
        outside / "var" / "ampquiz.db",
    ]
    r = run(
        sb,
        f"""
        import os
        for path in {[str(p) for p in paths]!r} + {[str(outside), str(outside.parent)]!r}:
            try:
                print(open(path).read() if os.path.isfile(path) else os.listdir(path))
            except OSError as e:
                print("hidden", type(e).__name__)
            print(os.path.exists(path))
    """,
    )
    assert ANSWER not in r.stdout and outside.name not in r.stdout, r.stdout
    assert r.stdout.count("hidden FileNotFoundError") == 5 and r.stdout.count("False") == 5, (
        r.stdout
    )
    assert_still_works(sb)


def test_cant_see_other_checkouts_or_the_servers_tree(sb: Sandbox, outside: Path) -> None:
    folders = [str(REPO), "/home", "/root", "/work", "/srv", "/opt", "/mnt", "/var", "/run", "/etc"]
    r = run(
        sb,
        f"""
        import os
        for path in ["{outside / "other-checkout"}", "{REPO / "pyproject.toml"}", "{REPO / "questions"}",
                     "{REPO / "app"}", "/var/lib", "/run", "/etc/shadow", "/etc/ssh"]:
            print(path, os.path.exists(path))
        print({{path: sorted(os.listdir(path)) for path in {folders!r} if os.path.isdir(path)}})
    """,
    )
    lines = r.stdout.splitlines()
    assert all(line.endswith(" False") for line in lines[:-1]), r.stdout
    # A folder shows only the way to what runners import from (the interpreter, a venv, this
    # package): the server's tree holds just `sandbox` (and a venv kept in it), /root just the way
    # to an interpreter installed there.
    on_the_way = {part for p in allowed_paths() for part in Path(p).parts} | {"tmp"}  # /var/tmp
    for folder, names in eval(lines[-1]).items():
        if folder != "/etc":
            assert set(names) <= on_the_way, (folder, names)
    assert set(eval(lines[-1])["/etc"]) <= {
        "group",
        "hosts",
        "ld.so.cache",
        "localtime",
        "nsswitch.conf",
        "passwd",
    }
    assert ANSWER not in r.stdout
    assert_still_works(sb)


def test_cant_learn_hidden_paths_from_the_runners_command_line_or_mounts(
    sb: Sandbox, secret_dir: Path, outside: Path
) -> None:
    r = run(
        sb,
        """
        import os
        for path in ["/proc/1/cmdline", "/proc/1/environ", "/proc/self/mountinfo", "/proc/self/cgroup"]:
            try:
                print(open(path, "rb").read().replace(b"\\0", b" ").decode())
            except PermissionError:
                print(path, "unreadable")  # environ: the runner is not dumpable once its uid dropped
    """,
    )
    for secret in (str(secret_dir), str(outside), str(REPO / "questions"), "AMPQUIZ", "hide"):
        assert secret not in r.stdout, (secret, r.stdout)
    assert_still_works(sb)


def test_cant_see_other_runs_cgroups_or_the_hosts_sys(sb: Sandbox) -> None:
    r = run(
        sb,
        """
        import os
        print(os.path.exists("/sys/fs/cgroup"), sorted(os.listdir("/sys")), sorted(os.listdir("/sys/devices")))
        print(sorted({line.rsplit(":", 1)[-1] for line in open("/proc/self/cgroup").read().split()}))
        print(os.cpu_count() >= 1)
    """,
    )
    assert r.stdout == "False ['devices'] ['system']\n['/']\nTrue\n", r.stdout
    assert_still_works(sb)


def test_cant_open_dev_fuse_or_any_device_but_the_harmless_ones(sb: Sandbox) -> None:
    r = run(
        sb,
        """
        import os
        print(sorted(os.listdir("/dev")))
        for dev in ["/dev/fuse", "/dev/kvm", "/dev/vda", "/dev/sda", "/dev/loop0", "/dev/mem", "/dev/tty", "/dev/userfaultfd"]:
            try:
                os.close(os.open(dev, os.O_RDWR))
                print("opened", dev)
            except OSError as e:
                print(type(e).__name__)
        with open("/dev/urandom", "rb") as f, open("/dev/null", "wb") as g:
            g.write(f.read(16))
        print(len(open("/dev/zero", "rb").read(8)))
        try:
            open("/dev/new-node", "w")
        except OSError as e:
            print("create", type(e).__name__)
    """,
    )
    lines = r.stdout.splitlines()
    harmless = [
        "fd",
        "full",
        "null",
        "random",
        "shm",
        "stderr",
        "stdin",
        "stdout",
        "urandom",
        "zero",
    ]
    if sb.environment.get("device_kind") == "cuda":  # and the GPU driver's device nodes
        harmless = sorted(harmless + [n for n in os.listdir("/dev") if n.startswith("nvidia")])
    assert eval(lines[0]) == harmless, lines[0]
    assert "opened" not in r.stdout and lines[1:9] == ["FileNotFoundError"] * 8, r.stdout
    assert lines[9:] == ["8", "create OSError"] or lines[9:] == ["8", "create PermissionError"], (
        lines
    )
    assert "minimal-dev" in r.environment.protections
    assert_still_works(sb)


@pytest.mark.skipif(os.geteuid() != 0, reason="building a root takes root")
def test_hide_still_covers_a_secret_inside_an_allowed_folder(tmp_path: Path) -> None:
    """`Sandbox(hide=...)` names paths no snippet may see; the allow-list hides everything outside
    what runners need, and `hide` still covers a path inside it."""
    allowed = tmp_path / "prefix"
    allowed.mkdir()
    (allowed / "lib.py").write_text("visible")
    (allowed / "secret.txt").write_text(ANSWER)
    (allowed / "secret-folder").mkdir()
    (allowed / "secret-folder" / "key").write_text(ANSWER)
    probe = textwrap.dedent(f"""
        import ctypes, os, sys
        sys.path.insert(0, {str(REPO)!r})
        from sandbox import filesystem, isolation
        isolation.unshare(isolation.CLONE_NEWNS)
        isolation.mount(None, "/", None, isolation.MS_REC | isolation.MS_PRIVATE)
        done = filesystem.allow_listed_root(
            [{str(allowed)!r}, sys.base_prefix, sys.prefix],
            [{str(allowed / "secret.txt")!r}, {str(allowed / "secret-folder")!r}],
            uid=200999, tmp_bytes=1 << 20, cuda=False,
        )
        print("allow-listed-filesystem" in done)
        print(open({str(allowed / "lib.py")!r}).read())
        print(repr(open({str(allowed / "secret.txt")!r}).read()), os.listdir({str(allowed / "secret-folder")!r}))
        print(os.path.exists({str(REPO / "pyproject.toml")!r}))
    """)
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout == "True\nvisible\n'' []\nFalse\n", out.stdout + out.stderr[-2000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting takes root")
def test_without_a_new_root_the_deny_list_still_hides(tmp_path: Path) -> None:
    """The fallback where the host refuses the new root (pivot_root refused, say): the host's tree,
    read-only, with the server's folders and service sockets covered."""
    secret = tmp_path / "server"
    (secret / "venv").mkdir(parents=True)
    (secret / "venv" / "lib.py").write_text("visible")
    (secret / "ampquiz.db").write_text(ANSWER)
    probe = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from sandbox import filesystem, isolation
        isolation.unshare(isolation.CLONE_NEWNS)
        isolation.mount(None, "/", None, isolation.MS_REC | isolation.MS_PRIVATE)
        done = filesystem.deny_listed([{str(secret)!r}], [{str(secret / "venv")!r}], 1 << 20, cuda=False)
        print(sorted(done))
        print(sorted(os.listdir({str(secret)!r})), open({str(secret / "venv" / "lib.py")!r}).read())
        print(os.listdir("/run"))
        try:
            open("/ampquiz-owned", "w")
        except OSError as e:
            print(type(e).__name__)
    """)
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout + out.stderr[-2000:]
    assert {"hidden-paths", "private-tmp", "read-only-root"} <= set(eval(lines[0]))
    assert lines[1:] == ["['venv'] visible", "[]", "OSError"], lines


def test_two_runs_at_once_share_no_folder_either_can_write(sb: Sandbox) -> None:
    """Every run's root is a copy of one template (built once by the zygote): what a run writes
    or mounts stays in its copy. One run writes into each writable folder and waits; a run beside
    it finds none of it, and each is named by its own uid in its own /etc/passwd."""
    places = ["/tmp/mine.txt", "/var/tmp/mine.txt", "/dev/shm/mine.txt", "/tmp/run/mine.txt"]
    cuda = sb.environment.get("device_kind") == "cuda"
    writer = textwrap.dedent(f"""
        import os, pwd, time
        for path in {places!r}:
            open(path, "w").write("x")
        print(os.getuid(), pwd.getpwuid(os.getuid()).pw_name, flush=True)
        time.sleep(3)
    """)
    looker = textwrap.dedent(f"""
        import os, pwd
        # What every run shares is read-only as a filesystem, not only as this run's mounts. On a
        # CUDA host, where each run builds a root of its own (no template), its mounts are.
        which = {0 if cuda else 1}
        mounts = {{f.split()[4]: (f.split()[5], f.split(" - ")[1].split()[2]) for f in open("/proc/self/mountinfo")}}
        print(mounts["/"][which].split(",")[0], mounts["/dev"][which].split(",")[0])
        print([p for p in {places!r} if os.path.exists(p)], os.getuid(), pwd.getpwuid(os.getuid()).pw_name)
    """)
    with ThreadPoolExecutor(max_workers=1) as beside:
        writing = beside.submit(sb.run, writer)
        time.sleep(1.5)  # the writer has written by now and sleeps
        looked = sb.run(looker)
        wrote = writing.result()
    assert wrote.status == "ok" and looked.status == "ok", (wrote, looked)
    writer_uid, writer_name = wrote.stdout.split()
    assert writer_name == "sandbox"
    shared, looked_for = looked.stdout.split("\n", 1)
    assert shared == "ro ro", looked.stdout
    seen, looker_uid, looker_name = looked_for.rsplit(maxsplit=2)
    assert seen == "[]", looked.stdout
    assert looker_name == "sandbox" and looker_uid != writer_uid, looked.stdout
    assert_still_works(sb)


@pytest.mark.own_pool  # a pool whose allowed folders include one under /tmp
def test_packages_kept_under_tmp_are_importable_read_only_and_tmp_is_still_the_runs_own(
    tmp_path: Path,
) -> None:
    """A checkout or a virtual environment under /tmp (a CI clone, say): each run's own /tmp used
    to cover it, so whatever torch imports lazily failed with ModuleNotFoundError and a printed
    tensor came out empty. The folder is bound again, read-only, on top of the run's tmpfs."""
    kept = tmp_path / "site-packages"
    kept.mkdir()
    (kept / "kept_under_tmp.py").write_text("VALUE = 42\n")
    (tmp_path / "beside-it.txt").write_text("not allowed")
    pool = Sandbox(workers=1)
    pool._link.config["keep"] = [*pool._link.config["keep"], str(kept)]
    with pool:
        r = pool.run(
            textwrap.dedent(f"""
            import os, sys
            sys.path.insert(0, {str(kept)!r})
            import kept_under_tmp
            print(kept_under_tmp.VALUE, os.access({str(kept)!r}, os.W_OK), os.path.exists({str(tmp_path / "beside-it.txt")!r}))
            open("/tmp/mine.txt", "w").write("x")
            print(sorted(os.listdir("/tmp")))
        """)
        )
    assert r.status == "ok", r
    first, listing = r.stdout.splitlines()
    assert first == "42 False False"
    assert "mine.txt" in listing and "beside-it.txt" not in listing


def test_torch_compiles_default_backend_says_what_to_use_instead(sb: Sandbox) -> None:
    """Inductor compiles C++, which a run cannot (no compiler headers in its root; and a first
    compile took 21 s on this host against a 10 s wall limit): the run said only "C++ compile
    error" and "algorithm: No such file or directory". It now names the backend that works."""
    r = sb.run(
        "import torch\nf = torch.compile(lambda x: (x * 2).sum())\nprint(f(torch.ones(4)).item())"
    )
    assert r.status == "error", r
    assert 'backend="aot_eager" shows the same graph, casts included.' in r.message, r.message
    ok = sb.run(
        'import torch\nf = torch.compile(lambda x: (x * 2).sum(), backend="aot_eager")\nprint(f(torch.ones(4)).item())'
    )
    assert (ok.status, ok.stdout) == ("ok", "8.0\n"), ok
