"""One file can never take the bank down: whatever is in the bank's folder (nesting hundreds of
levels deep, aliases that multiply a file, bytes that are not UTF-8, a control character in a
YAML escape, a number no one could read, a folder, a link or a pipe named like a set file, a name
the loader does not take), it is a problem at its `file:line` that leaves that file out, and the
other files are served: `load_bank` returns, `ampquiz lint` exits normally, and a running
server's reload keeps reloading."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.bank import load
from app.bank.load import load_bank
from tests.support.cli import ampquiz


def a_set(qid: str, prompt: str = "What prints?", **fields: str) -> str:
    """A valid set of one question; `fields` replace its lines (raw YAML values)."""
    values = {"kind": "predict_output", "topic": "t", "difficulty": "1", "prompt": prompt, "code": "print(1)",
              "answer": '"1"', "explanation": "e", "source": "s", **fields}  # fmt: skip
    body = "".join(f"    {key}: {value}\n" for key, value in values.items())
    return f"title: Set {qid}\ndescription: d\nquestions:\n  - id: {qid}\n{body}"


GOOD = a_set("good-one")


def line_of(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


Made = tuple[str, int, str]
"""The hostile entry's file name, the line its problem is at (0: any), and what it says."""


def _write(folder: Path, name: str, data: str | bytes) -> None:
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def deep_lists(folder: Path) -> Made:
    _write(folder, "deep-lists.yaml", "title: " + "[" * 600 + "]" * 600 + "\n")
    return "deep-lists.yaml", 1, "nested"


def deep_mappings(folder: Path) -> Made:
    text = "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "end\n"
    _write(folder, "deep-mappings.yaml", text)
    return "deep-mappings.yaml", 0, "nested"


def aliases_doubling(folder: Path) -> Made:
    text = "a0: &a0 [lol, lol]\n" + "".join(
        f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, 30)
    )
    _write(folder, "laughs.yaml", text)
    return "laughs.yaml", 1, "used again through an alias"


def scalar_aliases(folder: Path) -> Made:
    """One long text and a thousand aliases of it: 100 KB that a reader (or an export) takes as
    100 MB, a set the bank served."""
    text = (
        a_set("bomb", answer='"1"\n    accept: [' + ", ".join(["*big"] * 1000) + "]")
        + "    tags: []\n"
    )
    text = text.replace("prompt: What prints?", "prompt: &big " + "x" * 100_000)
    _write(folder, "bomb.yaml", text)
    return "bomb.yaml", 0, "aliases"


def huge(folder: Path) -> Made:
    _write(folder, "huge.yaml", a_set("huge-one") + ("# padding\n" * 60_000))
    return "huge.yaml", 1, "KiB"


def not_utf8(folder: Path) -> Made:
    text = a_set("latin-one", prompt="caf\udcff")
    _write(folder, "latin.yaml", text.encode("utf-8", "surrogateescape"))
    return "latin.yaml", line_of(a_set("latin-one"), "prompt:"), "UTF-8"


def raw_nul(folder: Path) -> Made:
    text = a_set("nul-one", prompt="a\x00b")
    _write(folder, "raw-nul.yaml", text)
    return "raw-nul.yaml", line_of(text, "prompt:"), "U+0000"


def escaped(name: str, field: str, value: str, says: str) -> Callable[[Path], Made]:
    def make(folder: Path) -> Made:
        text = a_set(name, **{field: value})
        _write(folder, f"{name}.yaml", text)
        return f"{name}.yaml", line_of(text, f"{field}:"), says

    make.__name__ = name
    return make


def big_number(folder: Path) -> Made:
    text = a_set("big-number", difficulty="1" * 5000)
    _write(folder, "big-number.yaml", text)
    return "big-number.yaml", line_of(text, "difficulty:"), "difficulty"


def impossible_date(folder: Path) -> Made:
    text = a_set("bad-date", source="2001-13-45")
    _write(folder, "bad-date.yaml", text)
    return "bad-date.yaml", line_of(text, "source:"), "source"


def a_tag_it_cannot_be(folder: Path) -> Made:
    text = a_set("bad-tag", source="!!timestamp z")  # PyYAML's constructor raised AttributeError
    _write(folder, "bad-tag.yaml", text)
    return "bad-tag.yaml", line_of(text, "source:"), "source"


def number_key(folder: Path) -> Made:
    text = a_set("number-key", source="s\n    1: one")
    _write(folder, "number-key.yaml", text)
    return "number-key.yaml", line_of(text, "1: one"), "key"


def duplicate_key(folder: Path) -> Made:
    text = a_set("dup-key", source="s\n    prompt: again")
    _write(folder, "dup-key.yaml", text)
    return "dup-key.yaml", line_of(text, "prompt: again"), "duplicate key"


def a_folder(folder: Path) -> Made:
    (folder / "folder.yaml").mkdir()
    return "folder.yaml", 1, "a folder, not a file"


def a_link_out(folder: Path) -> Made:
    outside = folder.parent / f"{folder.name}-outside.yaml"
    outside.write_text(a_set("from-outside"))
    (folder / "link-out.yaml").symlink_to(outside)
    return "link-out.yaml", 1, "link"


def a_pipe(folder: Path) -> Made:
    os.mkfifo(folder / "pipe.yaml")
    return "pipe.yaml", 1, "not a plain file"


def yml_beside_yaml(folder: Path) -> Made:
    _write(folder, "good-one.yml", a_set("good-two"))
    return "good-one.yml", 1, ".yaml"


def odd_name(folder: Path) -> Made:
    _write(folder, "Odd_Name.yaml", a_set("odd-name"))
    return "Odd_Name.yaml", 1, "lowercase words joined by '-'"


def a_name_not_utf8(folder: Path) -> Made:
    """A name that is no UTF-8: Python lists it with a surrogate in it, which no page, log or
    terminal can print (lint raised UnicodeEncodeError printing its problem)."""
    with open(os.fsencode(folder) + b"/caf\xe9.yaml", "w") as f:
        f.write(a_set("cafe"))
    return "caf\\xe9.yaml", 1, "lowercase words joined by '-'"


HOSTILE: list[Callable[[Path], Made]] = [
    deep_lists, deep_mappings, aliases_doubling, scalar_aliases, huge, not_utf8, raw_nul,
    escaped("ctrl-prompt", "prompt", r'"a\x01b"', "U+0001"),
    escaped("nul-code", "code", r'"print(1)\0"', "U+0000"),
    escaped("c1-explanation", "explanation", r'"e\x9b"', "U+009B"),
    escaped("del-answer", "answer", r'"1\x7f"', "U+007F"),
    escaped("cr-accept", "accept", r'["1\r"]', "U+000D"),
    big_number, impossible_date, a_tag_it_cannot_be, number_key, duplicate_key, a_folder, a_link_out, a_pipe,
    yml_beside_yaml, odd_name, a_name_not_utf8,
]  # fmt: skip


def load_within(seconds: float, folder: Path) -> load.Bank:
    """`load_bank`, which must come back (a pipe named like a set file blocked it for good)."""
    out: list[load.Bank] = []
    failed: list[BaseException] = []

    def go() -> None:
        try:
            out.append(load_bank(folder))
        except BaseException as exc:  # noqa: BLE001 - what escaped the loader, said by the test
            failed.append(exc)

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        for pipe in folder.glob("pipe.yaml"):  # let the blocked reader go
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"load_bank did not return in {seconds} s")
    if failed:
        raise failed[0]
    return out[0]


@pytest.mark.parametrize("make", HOSTILE, ids=lambda m: m.__name__)
def test_a_hostile_file_is_a_problem_at_its_line_and_the_others_are_served(
    tmp_path: Path, make: Callable[[Path], Made]
) -> None:
    folder = tmp_path / "bank"
    folder.mkdir()
    _write(folder, "good-one.yaml", GOOD)
    name, line, says = make(folder)
    started = time.monotonic()
    bank = load_within(10, folder)
    assert time.monotonic() - started < 3, "one file stalled the loader"
    assert [s.id for s in bank.sets] == ["good-one"]
    mine = [p for p in bank.problems if Path(p.path).name == name]
    assert mine and not [p for p in bank.problems if p not in mine], bank.problems
    assert any(says in p.message and (line == 0 or p.line == line) for p in mine), mine


def test_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    _write(tmp_path, "bom.yaml", "\ufeff" + GOOD)
    bank = load_bank(tmp_path)
    assert [s.id for s in bank.sets] == ["bom"] and not bank.problems


def test_a_file_that_vanishes_between_listing_and_reading_is_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "good-one.yaml", GOOD)
    listed = load.question_files(tmp_path) + [tmp_path / "gone.yaml"]
    monkeypatch.setattr(load, "question_files", lambda root: listed)
    bank = load_bank(tmp_path)
    assert [s.id for s in bank.sets] == ["good-one"]
    (problem,) = bank.problems
    assert problem.path.endswith("gone.yaml") and "no longer there" in problem.message


def test_whatever_escapes_reading_a_file_is_a_problem_at_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last line of defence: a fault of ours in reading one file (here, a validator that
    raises) leaves that file out, said at its path; it never escapes `load_bank`."""
    _write(tmp_path, "good-one.yaml", GOOD)
    _write(tmp_path, "other.yaml", a_set("other-one"))
    real = load.load_text

    def faulty(text: str, set_id: str, shown: str):  # type: ignore[no-untyped-def]
        if set_id == "other":
            raise RuntimeError("a fault of ours")
        return real(text, set_id, shown)

    monkeypatch.setattr(load, "load_text", faulty)
    bank = load_bank(tmp_path)
    assert [s.id for s in bank.sets] == ["good-one"]
    (problem,) = bank.problems
    assert (
        problem.path.endswith("other.yaml") and "RuntimeError: a fault of ours" in problem.message
    )


def test_lint_says_every_hostile_file_at_its_line_and_exits_normally(tmp_path: Path) -> None:
    folder = tmp_path / "bank"
    folder.mkdir()
    _write(folder, "good-one.yaml", GOOD)
    made = [make(folder) for make in HOSTILE if make is not a_pipe]  # a pipe: the loader's own test
    out = ampquiz("lint", str(folder))
    assert "Traceback" not in out.stderr and out.returncode == 1, out.stderr[-3000:]
    for name, line, _says in made:
        assert f"{name}:{line or ''}" in out.stdout, (name, out.stdout)
    assert out.stdout.splitlines()[-1].startswith("1 questions in 1 sets, ")


def test_a_running_reload_keeps_reloading_past_a_hostile_file(tmp_path: Path) -> None:
    """A server's bank: a hostile file dropped in is left out, and an edit of another file made
    after it is still served (the reload raised, and the bank stayed as it was until restart)."""
    from app.verify.live_bank import LiveBank

    _write(tmp_path, "good-one.yaml", GOOD)
    live = LiveBank(tmp_path, check_every_s=0.05)
    live.start()
    try:
        for make in HOSTILE:
            if make not in (a_pipe, yml_beside_yaml):
                make(tmp_path)
        _write(
            tmp_path, "good-one.yaml", a_set("good-one", prompt="Edited after the hostile files")
        )
        deadline = time.monotonic() + 15
        while (
            live.current().question("good-one").question.prompt != "Edited after the hostile files"
        ):
            assert time.monotonic() < deadline, "the reload stopped at a hostile file"
            time.sleep(0.05)
        assert any("deep-lists.yaml" in p.path for p in live.current().problems)
    finally:
        live.stop()


def test_a_live_bank_starts_on_a_folder_with_hostile_files(tmp_path: Path) -> None:
    """What `serve` builds first: it refused to start on one file nested 600 levels deep."""
    from app.verify.live_bank import LiveBank

    _write(tmp_path, "good-one.yaml", GOOD)
    deep_lists(tmp_path)
    big_number(tmp_path)
    live = LiveBank(tmp_path)
    assert [s.id for s in live.bank.sets] == ["good-one"] and len(live.bank.problems) == 2
