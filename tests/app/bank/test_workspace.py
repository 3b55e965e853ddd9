"""The bank as a writable folder (`app.bank.workspace`): names stay inside the folder, a file's
text is checked as the bank would take it, a draft is kept and a served file never loses its
questions, and a save replaces the file whole."""

from __future__ import annotations

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
    half = ws.check("served.yaml", "title: T\n", bank)  # learners are served it: never with problems
    assert half.served and not half.draft and "learners are served this file" in (half.refusal or "")
    draft = ws.check("new-one.yaml", "title: T\n", bank)
    assert draft.draft and draft.refusal is None and draft.problems
    good = ws.check("served.yaml", SET.format(qid="first") + "# edited\n", bank)
    assert good.loaded is not None and good.refusal is None and not good.draft
    with pytest.raises(WorkspaceError, match=f"over {SET_FILE_BYTES // 1024} KiB"):
        ws.parse("x.yaml", "#" * (SET_FILE_BYTES + 1))


def test_a_save_replaces_the_file_whole_and_a_refused_text_is_never_written(folder: Path) -> None:
    ws, bank = Workspace(folder), load_bank(folder)
    ws.save(ws.check("new-one.yaml", "title: T\n", bank))
    assert (folder / "new-one.yaml").read_text() == "title: T\n"
    ws.save(ws.check("served.yaml", SET.format(qid="renamed"), bank))
    assert "id: renamed" in (folder / "served.yaml").read_text()
    with pytest.raises(WorkspaceError, match="learners are served this file"):
        ws.save(ws.check("served.yaml", "title: T\n", bank))
    assert "id: renamed" in (folder / "served.yaml").read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["new-one.yaml", "served.yaml"]  # no temporary left


def test_a_new_set_is_a_draft_and_never_overwrites(folder: Path) -> None:
    ws = Workspace(folder)
    path = ws.create("walk-set.yaml", "Walk set")
    assert "topic: walk-set\n" in path.read_text() and "id: walk-set-first" in path.read_text()
    with pytest.raises(WorkspaceError, match="walk-set.yaml exists already: open it instead."):
        ws.create("walk-set.yaml", "Again")
