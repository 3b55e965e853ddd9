"""A snippet that writes its own report on the sandbox's channel: what it claims is checked against
how its process ended, and bounded, before anyone sees it. Each test is a real run, then a normal
run that still works.
"""

from __future__ import annotations

import json
import os
import textwrap

from sandbox import Limits, RunResult, Sandbox
from sandbox.claims import DROPPED_EXPLANATION
from tests.support.pool import assert_still_works

# Finds the report socket among the descriptors it inherited, and writes a report there.
FORGE = """
import json, os, socket, stat, struct
def forge(report):
    body = json.dumps(report).encode()
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                socket.socket(fileno=os.dup(int(name))).sendall(struct.pack("!I", len(body)) + body)
        except OSError:
            pass
ASSERTION = {
    "type": "result", "status": "error", "message": "The snippet raised AssertionError on line 1.",
    "exception": {"type": "AssertionError", "message": "the key says so", "traceback": "", "line": 1,
                  "source_line": "assert False"},
    "warnings": [], "explanation": None,
}
"""


def forged(sb: Sandbox, code: str, **kwargs):
    return sb.run(FORGE + textwrap.dedent(code), **kwargs)


def test_cant_reach_the_zygotes_account_of_the_run(sb: Sandbox) -> None:
    """The one socket a snippet holds is its report channel; how the run ended comes back on a
    socket of the zygote's, which the runner never had. (On a CUDA host the run also holds what
    the driver opened when the runner started CUDA, a socket of its own among them.)"""
    r = sb.run(
        textwrap.dedent("""
        import os, stat
        kinds = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                st = os.fstat(int(name))
                kinds[int(name)] = st.st_ino if stat.S_ISSOCK(st.st_mode) else "other"
            except OSError:
                pass  # listdir's own descriptor, closed by now
        print(kinds)
    """)
    )
    kinds = eval(r.stdout)
    sockets = {n: inode for n, inode in kinds.items() if inode != "other"}
    assert sb.zygote is not None
    zygotes = set()
    for fd in os.listdir(f"/proc/{sb.zygote.pid}/fd"):
        try:
            zygotes.add(os.readlink(f"/proc/{sb.zygote.pid}/fd/{fd}"))
        except FileNotFoundError:
            pass  # closed since it was listed: the zygote prepares the next runner meanwhile
    assert zygotes & {f"socket:[{inode}]" for inode in sockets.values()} == set(), (kinds, zygotes)
    if sb.environment.get("device_kind") == "cuda":
        assert 1 <= len(sockets) <= 2, kinds
    else:
        assert len(sockets) == 1 and set(kinds) - {0, 1, 2} == set(sockets), kinds
    assert_still_works(sb)


def test_forged_assertion_then_a_normal_end_is_not_an_assertion(sb: Sandbox) -> None:
    """The attack on `ampquiz verify`: a question's code writes "raised AssertionError" and then
    finishes normally, so that a key expecting AssertionError would pass."""
    r = forged(
        sb,
        """
        forge(ASSERTION)
        print("finished normally")
    """,
    )
    assert r.exception is None, r
    assert r.status == "error" and "contradicts how its process ended" in r.message, r
    assert "AssertionError" in r.message  # says what was claimed, but claims nothing itself
    assert r.stdout == "finished normally\n"  # the pipes are facts: they are kept
    assert_still_works(sb)


def test_forged_ok_from_a_run_that_raises_is_not_ok(sb: Sandbox) -> None:
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "", "exception": None, "warnings": []})
        raise ValueError("the truth")
    """,
    )
    assert r.status == "error" and "contradicts" in r.message, r
    assert r.exception is None
    assert_still_works(sb)


def test_forged_report_then_running_on_is_stopped_at_wall_time(sb: Sandbox) -> None:
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "", "exception": None, "warnings": []})
        import time
        time.sleep(60)
    """,
        limits=Limits(wall_s=2),
    )
    assert r.status == "timeout", r
    assert "report was set aside" in r.message
    assert r.duration_ms < 5000
    assert_still_works(sb)


def test_forged_report_then_only_the_main_thread_ending_is_stopped_at_wall_time(
    sb: Sandbox,
) -> None:
    """The main thread alone ends (SYS_exit, not exit_group) with the ok-code after a forged report,
    while another thread runs on: the kernel shows the main thread exiting with that code, and the
    report was believed at once (an attacker's review, 'ok' in 7 ms). A process has ended only when
    its last thread has."""
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "", "exception": None, "warnings": []})
        import ctypes, threading, time
        threading.Thread(target=lambda: time.sleep(60), daemon=True).start()
        ctypes.CDLL(None).syscall(60, 80)  # SYS_exit: this thread only
    """,
        limits=Limits(wall_s=2),
    )
    assert r.status == "timeout", r
    assert "report was set aside" in r.message
    assert_still_works(sb)


def test_forged_report_cannot_claim_an_ending_it_did_not_have(sb: Sandbox) -> None:
    """timeout, killed, output_limit and memory-by-OOM are observed by the pool, never told."""
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "timeout", "message": "pretend", "warnings": []})
        import os
        os._exit(80)
    """,
    )
    assert r.status == "killed" and "malformed" in r.message, r
    assert_still_works(sb)


def test_forged_report_cannot_change_the_runs_environment_or_protections(sb: Sandbox) -> None:
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "", "warnings": [],
               "environment": {"torch_version": "0.0", "protections": []}})
        import os
        os._exit(80)  # the ok-code: this forgery agrees with how the process ends
    """,
    )
    assert r.status == "ok", r
    assert r.environment.torch_version != "0.0"
    assert (
        "syscall-filter" in r.environment.protections
        and "allow-listed-filesystem" in r.environment.protections
    )
    assert_still_works(sb)


def test_forged_huge_explanation_is_dropped_not_rendered(sb: Sandbox) -> None:
    """A forged explanation of a million characters took the web 68 s and 360 MB of HTML."""
    code = """
        op = {"name": "torch.mm", "line": 1, "count": 1, "inputs": [], "output": None, "autocast": None,
              "casts": [], "reason": "x" * 1000}
        forge({"type": "result", "status": "ok", "message": "", "warnings": [],
               "explanation": {"summary": ["s" * 100_000], "ops": [op] * 600, "scaler": [], "hazards": []}})
        import os
        os._exit(80)
    """
    r = forged(sb, code, explain=True)
    assert r.status == "ok", r
    assert r.explanation == {
        "summary": [DROPPED_EXPLANATION],
        "ops": [],
        "scaler": [],
        "hazards": [],
    }
    assert len(r.to_json()) < 10_000
    r = forged(sb, code)  # not asked to explain: nothing of an explanation comes back
    assert r.status == "ok" and r.explanation is None, r
    assert_still_works(sb)


def test_forged_exception_texts_and_warnings_are_bounded(sb: Sandbox) -> None:
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "error", "message": "m" * 250_000, "warnings": [],
               "exception": {"type": "T" * 10_000, "message": "x" * 250_000, "traceback": "y" * 250_000,
                             "line": 10**9, "source_line": "not this code"}})
        import os
        os._exit(81)  # the raised-code: this forgery agrees with how the process ends
    """,
    )
    assert r.status == "error", r
    assert (
        len(r.exception.type) <= 200
        and len(r.exception.message) <= 17_000
        and len(r.exception.traceback) <= 17_000
    )
    assert (
        r.exception.line is None and r.exception.source_line is None
    )  # no such line in the snippet
    assert len(r.message) <= 4096
    assert len(json.dumps(r.to_dict())) < 60_000
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "", "exception": None,
               "warnings": [{"category": "UserWarning", "message": "w", "line": 1}] * 10_000})
        import os
        os._exit(80)
    """,
    )
    assert r.status == "killed" and "malformed" in r.message, r
    assert_still_works(sb)


def _in_every_text(sb: Sandbox, text: str, exception_type: str = "ValueError") -> RunResult:
    """A forged report with `text` (a string literal, as the snippet's source writes it) in every
    text field a report has, and the run ended as a runner ends after a report."""
    return forged(
        sb,
        f"""
        said = {text}
        forge({{"type": "result", "status": "error", "message": said,
               "warnings": [{{"category": "UserWarning", "message": said, "line": 1}}],
               "exception": {{"type": "{exception_type}", "message": said, "traceback": said, "line": 1}},
               "explanation": {{"summary": [said], "ops": [], "scaler": [], "hazards": []}}}})
        import os
        os._exit(81)
    """,
        explain=True,
    )


def test_forged_lone_surrogates_come_back_serialisable(sb: Sandbox) -> None:
    """A lone surrogate cannot be encoded as UTF-8: in a forged report's texts it made every page
    showing the run answer 500, and an interview's report fail on every load after."""
    r = _in_every_text(sb, '"bad \\ud800 text"', exception_type="ValueError\\udc80")
    assert r.status == "error", r
    assert r.exception.message == "bad \\ud800 text" and r.exception.type == "ValueError\\udc80"
    assert r.explanation["summary"] == ["bad \\ud800 text"]
    assert r.warnings[0].message == "bad \\ud800 text"
    r.to_json().encode("utf-8")  # what a page or an API answer does with it
    assert_still_works(sb)


def test_characters_that_hide_or_reorder_text_come_back_written_out(sb: Sandbox) -> None:
    """Terminal escapes, NUL, a right-to-left override (U+202E turned a printed line around on
    the page) and zero-width characters, printed or in a forged report's texts, come back as the
    escapes repr() writes, so a page shows what was there; tabs and line ends stay as they are."""
    printed = sb.run('print("\\x1b[31mred\\x1b[0m\\tnul\\x00 \\u202eevil\\u200b")')
    assert printed.stdout == "\\x1b[31mred\\x1b[0m\tnul\\x00 \\u202eevil\\u200b\n", printed
    r = _in_every_text(sb, '"bell \\x07 \\u202ereversed"')
    written = "bell \\x07 \\u202ereversed"
    assert r.exception.message == r.exception.traceback == r.warnings[0].message == written, r
    assert r.explanation["summary"] == [written]
    assert_still_works(sb)


def test_anything_before_the_report_makes_it_malformed(sb: Sandbox) -> None:
    """An honest runner's first message after the code is its report. The pool read past others
    to find one: a snippet that sent 700,000 tiny messages had the server parse each (1.5 s of
    its CPU for one run). Now the first decides, and nothing after it is read."""
    r = forged(
        sb,
        """
        import os, socket, struct
        for name in os.listdir("/proc/self/fd"):
            try:
                if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                    socket.socket(fileno=os.dup(int(name))).sendall((struct.pack("!I", 2) + b"{}") * 1000)
            except OSError:
                pass
        forge({"type": "result", "status": "ok", "message": "", "warnings": [], "explanation": None})
        os._exit(80)  # the ok-code: the report after the noise agrees with how the process ends
    """,
    )
    assert r.status == "killed" and "malformed" in r.message, r
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "", "warnings": [], "pad": "p" * 1_100_000})
        import os
        os._exit(80)
    """,
    )
    assert r.status == "killed" and "malformed" in r.message, r  # past any honest report's size
    assert_still_works(sb)


def test_an_honest_report_is_believed(sb: Sandbox) -> None:
    r = sb.run("import warnings\nwarnings.warn('careful')\nassert 1 == 2, 'really'\n", explain=True)
    assert r.status == "error" and r.exception.type == "AssertionError" and r.exception.line == 3, r
    assert r.exception.source_line == "assert 1 == 2, 'really'"
    assert [w.message for w in r.warnings] == ["careful"]
    assert r.explanation and r.explanation["summary"] != [DROPPED_EXPLANATION]


def test_the_pools_bounds_hold_every_honest_report() -> None:
    """The pool checks reports without importing torch; its bounds are the runner's own."""
    from sandbox import claims, execute
    from sandbox.explain import MAX_REPORT_BYTES, Explainer, hazards, scaler, summary

    assert claims.MAX_TEXT >= execute.MAX_TEXT + len("… [99999999 more characters]")
    assert claims.MAX_WARNINGS == execute.MAX_WARNINGS
    assert claims.EXPLANATION_BYTES >= MAX_REPORT_BYTES
    assert claims.MAX_OPS >= Explainer().max_ops
    assert claims.MAX_SCALER_EVENTS >= scaler.MAX_EVENTS
    assert claims.MAX_HAZARDS >= hazards.MAX_HAZARDS
    assert claims.MAX_SENTENCES >= summary.MAX_SENTENCES


def test_without_reading_the_kernel_the_zygotes_account_decides(sb: Sandbox, monkeypatch) -> None:
    """Where the pool may not read a run's exit status from /proc (no CAP_SYS_PTRACE), it waits
    for the zygote's account: slower by the process's teardown, the same verdicts."""
    import sandbox.collect

    monkeypatch.setattr(sandbox.collect, "exit_status_while_exiting", lambda handle: None)
    r = sb.run("assert 1 == 2")
    assert r.status == "error" and r.exception.type == "AssertionError", r
    r = forged(sb, "forge(ASSERTION)\nprint('finished normally')\n")
    assert r.status == "error" and r.exception is None and "contradicts" in r.message, r
    r = sb.run("import os\nos._exit(3)")
    assert r.status == "killed" and "code 3" in r.message, r
    assert_still_works(sb)


def test_a_forged_notice_is_never_shown_as_the_sandboxs_words(sb: Sandbox) -> None:
    """A report's message is shown as the sandbox's own notice: only the sentences the runner
    writes for its status get through; anything else becomes the plain one."""
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "Verified correct by the ampquiz team.",
               "warnings": [], "explanation": None})
        os._exit(80)
    """,
    )
    assert r.status == "ok" and r.message == "", r
    r = forged(
        sb,
        """
        forge({**ASSERTION, "message": "Your account has been flagged."})
        os._exit(81)
    """,
    )
    assert r.status == "error" and r.message == "The snippet raised AssertionError.", r
    honest = sb.run("assert 1 == 2\n")
    assert honest.message == "The snippet raised AssertionError on line 1.", honest
    # every sentence the runner writes gets through: a class of a function's own, a long exit code
    local = sb.run("def f():\n    class E(Exception): pass\n    raise E('x')\nf()\n")
    assert local.message == "The snippet raised f.<locals>.E on line 3.", local
    long_exit = sb.run("import sys\nsys.exit('bye ' * 200)\n")
    assert long_exit.message.startswith("The snippet called sys.exit('bye bye"), long_exit
    assert_still_works(sb)


def test_a_report_of_too_many_lists_is_not_parsed(sb: Sandbox) -> None:
    """Parsing holds the GIL of the process the pool lives in: 4 MB of empty lists cost it a
    second. A report with far more lists and objects than an honest one is malformed, unparsed."""
    r = forged(
        sb,
        """
        forge({"type": "result", "status": "ok", "message": "", "warnings": [], "explanation": None,
               "pad": [[] for _ in range(100_000)]})
        os._exit(80)
    """,
    )
    assert r.status == "killed" and "malformed" in r.message, r
    assert_still_works(sb)


def test_a_forged_crash_report_says_only_that_the_runner_failed(sb: Sandbox) -> None:
    r = forged(
        sb,
        """
        forge({"type": "crash", "message": "Verified correct by the ampquiz team."})
        os._exit(70)  # the runner's own exit code after it reports its failure
    """,
    )
    assert r.status == "killed" and r.message == "sandbox runner failed", r
    assert_still_works(sb)


TRICKLE = """
import fcntl, os, socket, stat, struct, time
SIOCOUTQ = 0x5411
for name in os.listdir("/proc/self/fd"):
    try:
        if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
            s = socket.socket(fileno=os.dup(int(name)))
            break
    except OSError:
        pass
s.sendall(struct.pack("!I", {declared}))
started = time.time()
while time.time() - started < {seconds}:
    s.send(b" ")
    while struct.unpack("i", fcntl.ioctl(s.fileno(), SIOCOUTQ, b"\\0\\0\\0\\0"))[0]:
        pass  # until the pool has read it: one wake-up of the pool per byte
"""


def test_a_report_trickled_a_byte_at_a_time_costs_the_pool_little_cpu(sb: Sandbox) -> None:
    """A run that wrote its report one byte at a time, each once the last was read, woke the
    pool's reading thread for every byte: half a core of the server's CPU, outside the run's own
    limit (an attacker's review). Past a few small reads the pool reads what trickled in in
    larger pieces. What the reading thread spent is measured in CPU seconds, not wall time."""
    import time

    spent = time.thread_time()
    r = sb.run(TRICKLE.format(declared=1_000_000, seconds=3), Limits(wall_s=4, cpu_s=8))
    spent = time.thread_time() - spent
    assert r.status in ("timeout", "killed"), r
    assert spent < 0.4, f"the pool's thread spent {spent:.2f} s of CPU reading a 3 s trickle"
    assert_still_works(sb)


def test_a_report_declared_past_any_honest_reports_size_is_refused_at_once(sb: Sandbox) -> None:
    """A header announcing more than the pool reads of a report is refused as soon as it is
    read, not after the body trickled in up to that size."""
    r = sb.run(TRICKLE.format(declared=2_000_000, seconds=20), Limits(wall_s=30, cpu_s=30))
    assert r.status == "killed" and "malformed" in r.message, r
    # Refused at the header, not when the trickle passes the pool's bound (12-15 s of it here).
    assert r.duration_ms < 5_000, r
    assert_still_works(sb)


def test_characters_written_out_stay_within_the_output_cap(sb: Sandbox) -> None:
    """Written out as escapes, 64 KB of control characters became up to 390,000 characters,
    kept with the run and sent to every page showing it: the cap holds for the text shown."""
    limits = Limits(output_bytes=16 * 1024)
    r = sb.run(
        'import sys\nsys.stdout.write("\\x01" * 16000)\nsys.stderr.write("\\u202e" * 16000)', limits
    )
    assert r.stdout.startswith("\\x01\\x01") and len(r.stdout) == limits.output_bytes, len(r.stdout)
    assert r.stderr.startswith("\\u202e") and len(r.stderr) == limits.output_bytes, len(r.stderr)
    assert_still_works(sb)


def test_invisible_characters_are_written_out_too() -> None:
    """A word joiner (U+2060) printed alone was proved as a key no learner could see or type."""
    from sandbox.claims import shown

    assert shown("a\u2060b\u00adc\u180ed") == "a\\u2060b\\xadc\\u180ed"
