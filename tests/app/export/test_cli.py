"""`ampquiz export` as an author types it: text formats to stdout or `-o`, QTI only to a file."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from app.bank.load import Bank
from tests.app.export import tricky
from tests.support.cli import ampquiz
from tests.support.gift import read_gift


def test_text_formats_go_to_stdout(bank: Bank) -> None:
    folder = Path(bank.sets[0].path).parent
    gift = ampquiz("export", str(folder), "--format", "gift")
    assert gift.returncode == 0, gift.stderr
    assert len(read_gift(gift.stdout)) == len(bank.questions)
    moodle = ampquiz("export", str(folder), "--format", "moodle")
    assert moodle.returncode == 0, moodle.stderr
    assert len(ET.fromstring(moodle.stdout).findall("question[idnumber]")) == len(bank.questions)
    rows = json.loads(ampquiz("export", str(folder)).stdout)  # json stays the default
    assert [r["id"] for r in rows] == [q.id for q in bank.questions]
    assert {r["proof"] for r in rows if r["id"] == "mc-multiple-conceptual"} == {
        "Conceptual — no code to run"
    }


def test_qti_needs_a_file(bank: Bank, tmp_path: Path) -> None:
    folder = Path(bank.sets[0].path).parent
    refused = ampquiz("export", str(folder), "--format", "qti")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert "-o" in refused.stderr and "zip" in refused.stderr
    out = tmp_path / "bank.zip"
    written = ampquiz("export", str(folder), "--format", "qti", "-o", str(out))
    assert written.returncode == 0, written.stderr
    assert written.stdout == ""
    with zipfile.ZipFile(out) as z:
        assert len([n for n in z.namelist() if n.startswith("items/")]) == len(bank.questions)


def test_o_writes_a_text_format_to_a_file(bank: Bank, tmp_path: Path) -> None:
    out = tmp_path / "bank.gift.txt"
    done = ampquiz(
        "export", str(Path(bank.sets[0].path).parent), "--format", "gift", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "wrote 5 questions in 2 sets" in done.stderr
    assert read_gift(out.read_text(encoding="utf-8"))[0].title == "Plain CUDA only"


def test_a_broken_bank_exports_nothing(tmp_path: Path) -> None:
    tricky.write_bank(tmp_path)
    (tmp_path / "broken.yaml").write_text("title: x\n")
    out = ampquiz("export", str(tmp_path), "--format", "moodle")
    assert out.returncode == 1
    assert out.stdout == ""
    assert "broken.yaml" in out.stderr


def test_a_key_its_record_contradicts_is_left_out_and_said_so(tmp_path: Path) -> None:
    """Exported, a key the committed record contradicts was the LMS's correct response (the
    contradiction said only in feedback shown after grading): it is left out, with where and why."""
    from app.bank import load_bank
    from app.verify.record import question_hash, record_name
    from tests.support.planted import wrong_key_set

    (tmp_path / "planted.yaml").write_text(wrong_key_set("planted-fp16-max"))
    tricky.write_bank(tmp_path)
    loaded = load_bank(tmp_path).question("planted-fp16-max")
    environment = {"device_kind": "cpu", "torch_version": "2.13.0", "date": "2026-11-27T10:00:00"}
    (tmp_path / "verified").mkdir()
    entry = {
        "result": "fail",
        "hash": question_hash(loaded.question),
        "reason": "printed output differs",
    }
    (tmp_path / "verified" / record_name(environment)).write_text(json.dumps({"environment": environment,
                                                                             "results": {loaded.id: entry}}))  # fmt: skip
    out = ampquiz("export", str(tmp_path), "--format", "gift")
    assert out.returncode == 0, out.stderr
    titles = [q.title for q in read_gift(out.stdout)]
    assert titles and "65536" not in out.stdout
    assert "left out" in out.stderr and "planted.yaml:4: planted-fp16-max" in out.stderr
    assert "running it on CPU contradicted the key" in out.stderr


def test_a_right_choice_whose_words_disagree_with_its_outcome_is_left_out(tmp_path: Path) -> None:
    """Texts swapped between choices: the live server holds the key back, and the export wrote it
    as the correct response with "Answer verified by running on CPU" (a review's swap)."""
    from tests.app.bank.test_load import SWAPPED

    (tmp_path / "swapped.yaml").write_text(SWAPPED)
    tricky.write_bank(tmp_path)
    out = ampquiz("export", str(tmp_path), "--format", "gift")
    assert out.returncode == 0, out.stderr
    assert "swapped-texts" not in out.stdout and read_gift(out.stdout)
    assert (
        "swapped.yaml:4: swapped-texts: the right choice's words disagree with its outcome"
        in out.stderr
    )
