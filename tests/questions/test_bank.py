"""The question bank itself: it lints clean, covers every seed, validates against its own schema,
every CPU-runnable key is proved by running it, and the committed CPU record covers it."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from app.bank.load import LoadedQuestion
from app.verify.check import KeyCheck, check
from sandbox import Sandbox
from tests.support.cli import BANK, SEEDS, ampquiz, pick_question


def test_the_bank_lints_clean_with_at_least_170_questions() -> None:
    out = ampquiz("lint", "questions/")
    assert out.returncode == 0, out.stdout
    n_questions, n_sets = (int(w) for w in out.stdout.split()[:4:3])
    assert n_questions >= 170 and n_sets >= 16
    # no errors, and no warnings either (keys no one could type without running the code)
    assert out.stdout.rstrip().endswith(", 0 errors"), out.stdout


def test_export_lists_every_question_and_names_every_seed() -> None:
    out = ampquiz("export", "--format", "json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) >= 170
    assert len({r["topic"] for r in rows}) >= 16
    assert {"id", "set_id", "kind", "prompt", "explanation", "source", "requires", "tags"} <= set(
        rows[0]
    )
    sources = " ".join(r["source"] for r in rows)
    seeds = sorted(p.name for p in SEEDS.glob("*.txt")) or [
        "000_71b29d88a740d8a3.txt",
        "001_5da5cf10f90ba3f6.txt",
        "002_370f07d0310bcef2.txt",
        "003_eee269cef78c8110.txt",
        "004_e592994df2354fad.txt",
    ]
    for seed in seeds:
        assert seed in sources, f"no question names {seed} as its source"


def test_schema_validates_the_banks_own_files() -> None:
    out = ampquiz("schema")
    assert out.returncode == 0
    schema = json.loads(out.stdout)
    for path in sorted(BANK.glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"title": "t", "description": "d", "questions": [{"id": "x", "kind": "essay"}]}, schema
        )


def test_every_cpu_runnable_answer_key_passes() -> None:
    out = ampquiz("verify", "questions/", "--json")
    report = json.loads(out.stdout)
    failed = [q for q in report["questions"] if q["result"] == "fail"]
    assert failed == [], json.dumps(failed, indent=2)
    assert out.returncode == 0
    assert report["counts"]["pass"] >= 50
    for q in report["questions"]:
        if q["result"] == "skip":
            assert q["reason"], q  # every skip says why


def test_committed_cpu_record_covers_the_bank() -> None:
    records = list((BANK / "verified").glob("cpu-torch*.json"))
    assert records, "run `ampquiz verify --record` and commit questions/verified/"
    out = ampquiz("verify", "questions/", "--only", pick_question("predict_output"))
    assert "stale record" not in out.stdout, out.stdout


def test_every_key_agrees_with_the_run_learners_are_shown(sandbox_pool: Sandbox) -> None:
    """The live server checks the run a result page shows (explained, as learners see it)
    against the key too, and holds back a key it contradicts (`ProofBook.witness`): every key
    proved here must agree with that run as well, or the bank would hold its own keys back."""
    from concurrent.futures import ThreadPoolExecutor

    from app.bank import load_bank
    from app.verify.proofs import ProofBook
    from app.verify.prover import PROVE_LIMITS
    from app.verify.question_runs import device_of

    book = ProofBook(sandbox_pool.environment)
    questions = [q for q in load_bank(BANK).questions if q.question.code and book.runnable_here(q)]
    assert len(questions) >= 50

    def shown(loaded: LoadedQuestion) -> tuple[str, KeyCheck]:
        run = sandbox_pool.run(
            loaded.question.code, PROVE_LIMITS, explain=True, device=device_of(loaded)
        )
        return loaded.id, check(loaded, run, book.device)

    with ThreadPoolExecutor(2) as threads:
        contradicted = {
            qid: c.reason for qid, c in threads.map(shown, questions) if c.result != "pass"
        }
    assert contradicted == {}
