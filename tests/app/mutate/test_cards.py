"""Recording mutants' runs and reading them back as "What if…" cards: only what still holds for
today's code is shown, and the verification records are not disturbed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.bank.load import load_bank
from app.mutate.cards import RecordedMutants, diff_lines, what_if
from app.verify.record import load_mutant_records, load_records, mutants_dir
from sandbox import Sandbox

QUESTION = """\
title: GradScaler for tests
description: One training step.
questions:
  - id: one-step
    kind: predict_output
    topic: gradscaler
    difficulty: 1
    prompt: What does this print?
    code: |
      import torch
      w = torch.nn.Parameter(torch.tensor([1.0]))
      opt = torch.optim.SGD([w], lr=0.1)
      scaler = torch.amp.GradScaler("cpu")
      scaler.scale((w * 2.0).sum()).backward()
      scaler.step(opt)
      scaler.update()
      print(round(w.item(), 4), scaler.get_scale())
    requires: cpu
    answer: 0.8 65536.0
    explanation: One step.
    source: tests
"""


def write_bank(folder: Path, text: str = QUESTION) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scaler.yaml").write_text(text)
    return folder


def test_recorded_mutants_come_back_as_cards(recorded: Path, sandbox_pool: Sandbox) -> None:
    (record,) = load_mutant_records(recorded)
    assert (
        record.path
        == mutants_dir(recorded) / f"cpu-torch{sandbox_pool.environment['torch_version']}.json"
    )
    loaded = load_bank(recorded).question("one-step")
    assert loaded is not None
    shown = what_if(load_mutant_records(recorded), loaded, sandbox_pool.environment)
    assert shown is not None and shown.hidden == 0
    rules = [c.rule for c in shown.cards]
    assert {
        "drop-scale",
        "drop-update",
        "optimizer-step",
        "scaler-disabled",
        "swap-scaler-device",
    } <= set(rules)
    assert shown.where.startswith("run on CPU · torch ")
    drop_scale = next(c for c in shown.cards if c.rule == "drop-scale")
    assert drop_scale.visible_effect and drop_scale.run["exception"]["type"] == "AssertionError"
    assert {"kind": "add", "text": "+(w * 2.0).sum().backward()"} in drop_scale.diff
    assert shown.cards == sorted(shown.cards, key=lambda c: not c.visible_effect)  # effects first
    assert shown.original["stdout"] == "0.8 65536.0\n"


def test_a_changed_question_shows_no_stale_card(recorded: Path, sandbox_pool: Sandbox) -> None:
    write_bank(recorded, QUESTION.replace("lr=0.1", "lr=0.2"))
    loaded = load_bank(recorded).question("one-step")
    assert loaded is not None
    assert what_if(load_mutant_records(recorded), loaded, sandbox_pool.environment) is None


def test_a_mutant_that_no_longer_matches_its_rule_is_left_out(
    recorded: Path, sandbox_pool: Sandbox
) -> None:
    (path,) = mutants_dir(recorded).glob("*.json")
    data = json.loads(path.read_text())
    entry = data["questions"]["one-step"]
    entry["rules"] = (
        "0" * 16
    )  # recorded under other rules: today's mutants are derived and compared
    entry["mutants"][0]["hash"] = "0" * 16  # as if that rule had changed since
    path.write_text(json.dumps(data))
    loaded = load_bank(recorded).question("one-step")
    assert loaded is not None
    shown = what_if(load_mutant_records(recorded), loaded, sandbox_pool.environment)
    assert shown is not None and shown.hidden == 1
    assert data["questions"]["one-step"]["mutants"][0]["rule"] not in [c.rule for c in shown.cards]


def test_a_record_made_under_these_rules_is_shown_without_deriving_the_mutants(
    recorded: Path, sandbox_pool: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record made from this very code under today's rules holds what the rules would derive:
    a page shows it without deriving them again (~90 ms a question, once per web process)."""
    from app.mutate import cards as cards_module

    def no_deriving(code: str) -> None:
        raise AssertionError("the mutants were derived again")

    monkeypatch.setattr(cards_module, "mutants_of", no_deriving)
    loaded = load_bank(recorded).question("one-step")
    assert loaded is not None
    shown = what_if(load_mutant_records(recorded), loaded, sandbox_pool.environment)
    assert shown is not None and shown.hidden == 0 and "drop-scale" in [c.rule for c in shown.cards]


def test_the_mutant_record_is_not_a_verification_record(recorded: Path) -> None:
    assert load_records(recorded) == []  # the proofs never read verified/mutants/


def test_a_record_of_another_device_is_not_used(recorded: Path, sandbox_pool: Sandbox) -> None:
    (path,) = mutants_dir(recorded).glob("*.json")
    data = json.loads(path.read_text())
    data["environment"]["device_kind"] = "cuda"
    path.write_text(json.dumps(data))
    loaded = load_bank(recorded).question("one-step")
    assert loaded is not None
    assert what_if(load_mutant_records(recorded), loaded, sandbox_pool.environment) is None


def test_the_shelf_reads_a_record_again_when_it_changes(
    recorded: Path, sandbox_pool: Sandbox
) -> None:
    shelf = RecordedMutants(recorded, check_every_s=0)
    loaded = load_bank(recorded).question("one-step")
    assert loaded is not None
    assert shelf.what_if(loaded, sandbox_pool.environment) is not None
    (path,) = mutants_dir(recorded).glob("*.json")
    data = json.loads(path.read_text())
    data["questions"] = {}
    path.write_text(json.dumps(data))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert shelf.what_if(loaded, sandbox_pool.environment) is None


def test_diff_lines_are_labelled() -> None:
    diff = "--- question\n+++ what if: x\n@@ -3,3 +3,3 @@\n a\n-b\n+c"
    assert diff_lines(diff) == [
        {"kind": "hunk", "text": "from line 3"},
        {"kind": "ctx", "text": " a"},
        {"kind": "del", "text": "-b"},
        {"kind": "add", "text": "+c"},
    ]
