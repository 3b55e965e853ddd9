"""`app.verify.proofs.ProofBook`: which keys the live server grades, and on what proof."""

from __future__ import annotations

from pathlib import Path

from app.bank.load import LoadedQuestion
from app.bank.schema import PredictOutputQuestion
from app.verify.proofs import ProofBook
from app.verify.record import Record, question_hash

CPU = {"device_kind": "cpu", "torch_version": "2.13.0"}
CUDA = {"device_kind": "cuda", "torch_version": "2.13.0", "device_name": "a GPU"}


def question(**fields: object) -> LoadedQuestion:
    q = PredictOutputQuestion(**{
        "id": "q", "topic": "t", "difficulty": 1, "prompt": "p", "explanation": "e", "source": "s",
        "kind": "predict_output", "code": "print(1)", "answer": "torch.float16", **fields,
    })  # fmt: skip
    return LoadedQuestion(question=q, set_id="s", path="s.yaml", line=1)


def record(environment: dict[str, str], loaded: LoadedQuestion, result: str) -> Record:
    entry = {"result": result, "hash": question_hash(loaded.question)}
    return Record(
        Path(f"{environment['device_kind']}.json"),
        {**environment, "date": "2026-11-27"},
        {loaded.id: entry},
    )


def test_a_cuda_server_grades_a_question_about_the_cpu_on_the_cpu_record_not_on_its_own_run() -> (
    None
):
    """A question about the CPU's output runs on a CUDA host too, but there its run proves what
    CUDA prints (`device_answers.cuda`), not the CPU answer learners are graded on: that was
    "proved" on the CUDA host, a wrong CPU key with it (an AMP expert's review)."""
    loaded = question(requires="any", device_answers={"cuda": "torch.bfloat16"})
    book = ProofBook(CUDA)
    assert not book.runnable_here(loaded)
    assert book.proof(loaded, []).state == "elsewhere"
    held = book.proof(loaded, [record(CPU, loaded, "fail"), record(CUDA, loaded, "pass")])
    assert held.state == "held_back" and "CPU record" in held.reason
    assert book.proof(loaded, [record(CPU, loaded, "pass")]).state == "elsewhere"
    # On a CPU host the same question is proved by running it there.
    assert ProofBook(CPU).runnable_here(loaded)


def test_a_key_about_other_torch_releases_is_held_back_unless_a_record_made_on_one_proves_it() -> (
    None
):
    """`torch_versions: ">=2.14"` on a server running 2.13.0 was graded as "elsewhere", on the
    author's word, beside this server's own run printing something else."""
    loaded = question(requires="cpu", torch_versions=">=2.14")
    book = ProofBook(CPU)
    held = book.proof(loaded, [])
    assert held.state == "held_back" and "this server runs torch 2.13.0" in held.reason
    newer = {"device_kind": "cpu", "torch_version": "2.14.1"}
    assert book.proof(loaded, [record(newer, loaded, "pass")]).state == "elsewhere"
    assert book.proof(loaded, [record(newer, loaded, "fail")]).state == "held_back"
    # A record of another device says nothing of the CPU's key.
    assert (
        book.proof(loaded, [record({**CUDA, "torch_version": "2.14.1"}, loaded, "pass")]).state
        == "held_back"
    )
    assert ProofBook({"device_kind": "cpu", "torch_version": "2.14.1"}).runnable_here(loaded)


def test_a_later_run_that_contradicts_a_proved_key_holds_it_back_whatever_proved_it() -> None:
    """Code printing an unseeded random draw passed the prover's two runs (and a committed
    record) by luck; the run a result page then showed printed something else, beside a verdict
    graded on the key. Any run of the code handed out is checked against the key."""
    from sandbox import RunResult

    loaded = question(requires="cpu", answer="True")
    book = ProofBook(CPU)
    lucky = [record(CPU, loaded, "pass")]
    assert book.proof(loaded, lucky).state == "proved"
    book.witness(
        loaded, RunResult(status="timeout", stdout="")
    )  # ended for a reason of the moment: says nothing
    book.witness(loaded, RunResult(status="ok", stdout="True\n"))
    assert book.proof(loaded, lucky).state == "proved"
    book.witness(loaded, RunResult(status="ok", stdout="False\n"))
    held = book.proof(loaded, lucky)
    assert held.state == "held_back" and "made after it was proved contradicts it" in held.reason
    assert "-True" in held.diff and "+False" in held.diff
    # An edit of the key is a new version: judged on its own runs.
    edited = question(requires="cpu", answer="False")
    assert book.proof(edited, [record(CPU, edited, "pass")]).state == "proved"


def test_a_right_choice_whose_words_disagree_with_its_outcome_is_held_back(tmp_path: Path) -> None:
    """Texts swapped between the right choice and a wrong one: the run proves the right choice's
    outcome, and learners were graded right for picking words the run contradicts (lint only
    warned, in the editor). Held back, whatever proves the outcome; wrong choices' words are lint's."""
    from app.bank import load_bank
    from tests.app.bank.test_load import SWAPPED

    (tmp_path / "swapped.yaml").write_text(SWAPPED)
    loaded = load_bank(tmp_path).question("swapped-texts")
    held = ProofBook(CPU).proof(loaded, [record(CPU, loaded, "pass")])
    assert (
        held.state == "held_back"
        and "choice 1's text names float32, but its outcome prints bfloat16" in held.reason
    )
    (tmp_path / "swapped.yaml").write_text(
        SWAPPED.replace("It prints `torch.float32`, because", "It prints `torch.bfloat16`, because")
    )
    fixed = load_bank(tmp_path).question("swapped-texts")
    assert ProofBook(CPU).proof(fixed, [record(CPU, fixed, "pass")]).state == "proved"


def test_this_servers_own_failed_proof_outranks_a_record_that_says_pass() -> None:
    """The server held a key back on its own run; a record file saying pass (hand-written: its
    hash is anyone's to compute) then made it "proved" (a review's forged record)."""
    from app.verify.check import KeyCheck

    loaded = question(requires="cpu")
    book = ProofBook(CPU)
    book.remember(loaded, KeyCheck(loaded.id, "s", "fail", reason="printed output differs"))
    assert book.proof(loaded, []).state == "held_back"
    assert book.proof(loaded, [record(CPU, loaded, "pass")]).state == "held_back"
