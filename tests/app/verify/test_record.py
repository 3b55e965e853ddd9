"""The verification record and its one staleness rule, applied alike by `ampquiz verify` and the
web pages (a `skip` entry goes stale like any other when its question changes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.bank.load import load_bank
from app.verify.record import (
    Record,
    is_stale,
    load_records,
    question_hash,
    stale_entries,
    verifications,
)
from tests.support.cli import ampquiz
from tests.support.web import BANK, Web


def bank_with_record(folder: Path, *, stale: set[str]) -> Path:
    """The web tests' clean set, with a CPU record: a pass for each CPU question, a skip for the
    CUDA one, and a wrong hash (the question changed since) for the ids in `stale`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "basics.yaml").write_text(BANK["basics.yaml"])
    results = {}
    for loaded in load_bank(folder).questions:
        if not loaded.question.code:
            continue
        result = "skip" if loaded.question.requires == "cuda" else "pass"
        digest = "0" * 16 if loaded.id in stale else question_hash(loaded.question)
        results[loaded.id] = {"result": result, "hash": digest}
    results["gone-question"] = {"result": "pass", "hash": "1" * 16}
    env = {
        "torch_version": "2.13.0",
        "device_kind": "cpu",
        "device_name": "x",
        "date": "2026-11-01T00:00:00+00:00",
    }
    (folder / "verified").mkdir()
    (folder / "verified" / "cpu-torch2.13.0.json").write_text(
        Record(Path("x"), env, results).to_json()
    )
    return folder


STALE = {"po-linear-dtype", "po-needs-cuda"}  # a pass and a skip


def test_the_rule_is_the_same_for_every_result(tmp_path: Path) -> None:
    folder = bank_with_record(tmp_path / "bank", stale=STALE)
    bank, records = load_bank(folder), load_records(folder)
    entries = records[0].results
    for loaded in bank.questions:
        if loaded.id in entries:
            assert is_stale(entries[loaded.id], loaded.question) == (loaded.id in STALE), loaded.id
    said = stale_entries(records, bank)
    assert sorted(said) == [
        "cpu-torch2.13.0.json: gone-question is no longer in the bank",
        "cpu-torch2.13.0.json: po-linear-dtype changed since it was verified",
        "cpu-torch2.13.0.json: po-needs-cuda changed since it was verified",
    ]
    labels = {
        q.id: [v.result for v in verifications(records, q)]
        for q in bank.questions
        if q.question.code
    }
    assert labels == {
        "po-linear-dtype": ["stale", "none"],
        "mc-half-dtype": ["pass", "none"],
        "po-needs-cuda": ["stale", "none"],
    }


def test_the_command_line_names_every_stale_entry(tmp_path: Path) -> None:
    folder = bank_with_record(tmp_path / "bank", stale=STALE)
    out = ampquiz("verify", str(folder), "--only", "mc-half-dtype", "--json")
    assert out.returncode == 0, out.stderr
    stale = json.loads(out.stdout)["stale"]
    assert any("po-linear-dtype changed" in s for s in stale)
    assert any("po-needs-cuda changed" in s for s in stale)  # the skip, too
    assert not any("mc-half-dtype" in s for s in stale)


@pytest.mark.anyio
async def test_the_pages_treat_the_same_entries_as_stale(web: Web) -> None:
    """The record's stale pass is not shown as proof (the server proves that key again itself);
    its stale skip says "out of date"; the fresh entry is shown as the record's proof."""
    bank_with_record(web.tmp / "recorded", stale=STALE)
    async with web.client(bank=web.tmp / "recorded") as c:
        changed = (await c.get("/questions/po-linear-dtype")).text
        assert "2026-11-01" not in changed
        assert "being verified on CPU now" in changed or "(on this server)" in changed
        skipped = (await c.get("/questions/po-needs-cuda")).text
        assert "verified on CPU: out of date (the question changed since 2026-11-01)" in skipped
        fresh = (await c.get("/questions/mc-half-dtype")).text
        assert "verified by running on CPU · torch 2.13.0 · 2026-11-01" in fresh
        assert "out of date" not in fresh


def test_a_question_not_run_on_a_device_says_why_beside_it(tmp_path: Path) -> None:
    folder = bank_with_record(tmp_path / "bank", stale=set())
    path = folder / "verified" / "cpu-torch2.13.0.json"
    data = json.loads(path.read_text())
    data["results"]["mc-half-dtype"].update(
        result="skip", reason="its key is what torch >=2.14 does; this host runs torch 2.13.0"
    )
    path.write_text(json.dumps(data))
    loaded = load_bank(folder).question("mc-half-dtype")
    assert loaded is not None
    cpu = verifications(load_records(folder), loaded)[0]
    assert (
        cpu.label
        == "not run on CPU: its key is what torch >=2.14 does; this host runs torch 2.13.0 (2026-11-01)"
    )
