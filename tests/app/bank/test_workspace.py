"""The bank as a writable folder (`app.bank.workspace`): names stay inside the folder, a file's
text is checked as the bank would take it, a draft is kept and a served file never loses its
questions, and a save replaces the file whole."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import time
from pathlib import Path

import pytest

from app.bank.load import load_bank
from app.bank.workspace import SET_FILE_BYTES, NoSuchFile, Workspace, WorkspaceError

SET = """title: T
description: D
questions:
  - id: {qid}
    kind: predict_output
    topic: t
    difficulty: 1
    prompt: What prints?
    code: print(1)
    answer: "1"
    explanation: E
    source: S
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "served.yaml").write_text(SET.format(qid="first"))
    return tmp_path


def test_names_stay_in_the_folder_and_name_files_the_loader_reads(folder: Path) -> None:
    ws = Workspace(folder)
    assert ws.path("served.yaml") == folder / "served.yaml"
    assert Workspace(folder / "served.yaml").folder == folder  # a bank given as one of its files
    for bad in ("../served.yaml", "sub/x.yaml", "Served.yaml", "x.txt", ".yaml", "a--b.yaml"):
        with pytest.raises(WorkspaceError, match="lowercase words joined by '-'"):
            ws.path(bad, new=True)
    with pytest.raises(NoSuchFile, match="The bank has no file 'other.yaml'."):
        ws.read("other.yaml")
    assert ws.path("other.yaml", new=True) == folder / "other.yaml"


def test_the_text_is_checked_as_the_bank_would_take_it(folder: Path) -> None:
    ws, bank = Workspace(folder), load_bank(folder)
    taken = ws.check("second.yaml", SET.format(qid="first"), bank)  # another file serves its id
    assert taken.loaded is None and "the id 'first' is taken" in taken.problems[0].message
    assert taken.loads_alone and not taken.served and not taken.draft
    assert taken.refusal == "The file does not lint; nothing was saved."
    half = ws.check(
        "served.yaml", "title: T\n", bank
    )  # learners are served it: never with problems
    assert (
        half.served and not half.draft and "learners are served this file" in (half.refusal or "")
    )
    draft = ws.check("new-one.yaml", "title: T\n", bank)
    assert draft.draft and draft.refusal is None and draft.problems
    good = ws.check("served.yaml", SET.format(qid="first") + "# edited\n", bank)
    assert good.loaded is not None and good.refusal is None and not good.draft
    with pytest.raises(WorkspaceError, match=f"over {SET_FILE_BYTES // 1024} KiB"):
        ws.parse("x.yaml", "#" * (SET_FILE_BYTES + 1))


def test_a_save_replaces_the_file_whole_and_a_refused_text_is_never_written(folder: Path) -> None:
    ws, bank = Workspace(folder), load_bank(folder)
    ws.save(
        ws.check("new-one.yaml", "title: T\n", bank), ""
    )  # "": the version of a file not there yet
    assert (folder / "new-one.yaml").read_text() == "title: T\n"
    version = ws.save(
        ws.check("served.yaml", SET.format(qid="renamed"), bank), ws.open("served.yaml").version
    )
    assert "id: renamed" in (folder / "served.yaml").read_text()
    with pytest.raises(WorkspaceError, match="learners are served this file"):
        ws.save(ws.check("served.yaml", "title: T\n", bank), version)
    assert "id: renamed" in (folder / "served.yaml").read_text()
    assert sorted(p.name for p in folder.iterdir()) == [
        "new-one.yaml",
        "served.yaml",
    ]  # no temporary left


def test_a_new_set_is_a_draft_and_never_overwrites(folder: Path) -> None:
    ws = Workspace(folder)
    path = ws.create("walk-set.yaml", "Walk set")
    assert "topic: walk-set\n" in path.read_text() and "id: walk-set-first" in path.read_text()
    with pytest.raises(WorkspaceError, match="walk-set.yaml exists already: open it instead."):
        ws.create("walk-set.yaml", "Again")


@pytest.mark.parametrize("name", ["x.yaml\n", "x.yml", "x.yaml ", "x.YAML", "x.yaml/", "\nx.yaml"])
def test_a_name_is_one_canonical_form_matched_whole(folder: Path, name: str) -> None:
    """`^…$` took "x.yaml\\n" (a file the bank never reads, and a 500), and `.yml` made a second
    set with the id of `x.yaml`'s."""
    with pytest.raises(WorkspaceError, match="lowercase words joined by '-', ending in .yaml"):
        Workspace(folder).path(name, new=True)


def test_a_save_is_compare_and_swap_and_a_conflict_says_what_changed(folder: Path) -> None:
    from app.bank.workspace import Conflict, version_of

    ws, bank = Workspace(folder), load_bank(folder)
    opened = ws.open("served.yaml")
    assert opened.version == version_of(
        (folder / "served.yaml").read_bytes()
    ) and opened.text == SET.format(qid="first")
    theirs = opened.text.replace("prompt: What prints?", "prompt: What does it print, theirs?")
    mine = opened.text + "# mine\n"
    after = ws.save(ws.check("served.yaml", theirs, bank), opened.version)
    assert after == version_of(theirs.encode()) and (folder / "served.yaml").read_text() == theirs
    with pytest.raises(Conflict) as refused:
        ws.save(ws.check("served.yaml", mine, bank), opened.version)
    assert (folder / "served.yaml").read_text() == theirs  # nothing lost
    conflict = refused.value
    assert conflict.current == theirs and conflict.version == after and conflict.status == 409
    diff = conflict.diff(opened.text)
    assert (
        "-    prompt: What prints?\n" in diff
        and "+    prompt: What does it print, theirs?\n" in diff
    )
    assert ws.save(ws.check("served.yaml", mine, bank), conflict.version) == version_of(
        mine.encode()
    )  # merged, saved again
    assert (folder / "served.yaml").read_text() == mine
    # a new file: the version of a file that is not there is "", and only one author creates it
    assert ws.save(ws.check("fresh.yaml", "title: T\n", bank), "") == version_of(b"title: T\n")
    with pytest.raises(Conflict):
        ws.save(ws.check("fresh.yaml", "title: U\n", bank), "")


def _slow_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write waits a while after its check: without a lock around the compare and the
    rename, every saver that started on one version passes the check before any of them writes."""
    from app.bank import workspace

    real = workspace.write_atomically

    def slow(path: Path, text: str) -> None:
        time.sleep(0.3)
        real(path, text)

    monkeypatch.setattr(workspace, "write_atomically", slow)


def _save_as(folder: str, version: str, n: int) -> str:
    from app.bank.workspace import Conflict

    ws = Workspace(folder)
    text = SET.format(qid="first") + f"# saver {n}\n"
    try:
        ws.save(ws.check("served.yaml", text, load_bank(folder)), version)
        return "saved"
    except Conflict:
        return "conflict"


def test_savers_on_one_version_in_threads_one_wins(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_writes(monkeypatch)
    version = Workspace(folder).open("served.yaml").version
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        said = list(pool.map(lambda n: _save_as(str(folder), version, n), range(6)))
    assert sorted(said) == ["conflict"] * 5 + ["saved"], said
    winner = said.index("saved")
    assert (folder / "served.yaml").read_text().endswith(f"# saver {winner}\n")


def test_savers_on_one_version_in_processes_one_wins(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_writes(monkeypatch)
    version = Workspace(folder).open("served.yaml").version
    forked = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(4, mp_context=forked) as pool:
        said = list(pool.map(_save_as, [str(folder)] * 4, [version] * 4, range(4)))
    assert sorted(said) == ["conflict"] * 3 + ["saved"], said
    assert (folder / "served.yaml").read_text().endswith(f"# saver {said.index('saved')}\n")


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda f: (f / "dir.yaml").mkdir(), "a folder, not a file"),
        (lambda f: (f / "link.yaml").symlink_to(f / "served.yaml"), "link"),
        (lambda f: (f / "latin.yaml").write_bytes(b"title: caf\xe9\n"), "UTF-8"),
        (lambda f: (f / "big.yaml").write_text("#" * (SET_FILE_BYTES + 1)), "KiB"),
    ],
    ids=["folder", "link", "not-utf8", "huge"],
)
def test_what_cannot_be_opened_is_said_not_raised(folder: Path, make, says: str) -> None:  # type: ignore[no-untyped-def]
    make(folder)
    name = next(p.name for p in folder.iterdir() if p.name != "served.yaml")
    with pytest.raises(WorkspaceError, match=says):
        Workspace(folder).open(name)


def test_a_text_that_is_not_unicode_is_refused_before_it_is_written(folder: Path) -> None:
    """A lone surrogate typed in the studio: a draft of it raised UnicodeEncodeError while writing."""
    ws = Workspace(folder)
    with pytest.raises(WorkspaceError, match="not Unicode text"):
        ws.check("draft-one.yaml", "title: T \ud800\n", load_bank(folder))
    assert not (folder / "draft-one.yaml").exists()
