"""`app.verify.check`: what a run must show for a key to be proved."""

from __future__ import annotations

import pytest

from app.bank.schema import Expect, PredictOutputQuestion
from app.verify.check import check_expect, printed_contains, skip_reason
from sandbox import RunResult


@pytest.mark.parametrize(("printed", "fragment", "found"), [
    ("torch.float16", "float16", True), ("torch.bfloat16", "float16", False), ("torch.bfloat16", "float", False),
    ("x 1.0 y", "1.0", True), ("1.05", "1.0", False), ("1.5", "1", False), ("21.0", "1.0", False),
    ("dtype=torch.float16)", "torch.float16)", True), ("mat1 and mat2 must have the same dtype", "same dtype", True),
    ("tensor(-inf)", "inf", False), ("tensor(inf)", "inf", True), ("-1.0", "1.0", False), ("+1.0", "1.0", False),
    ("0.5", "5", False), ("x=-1.0", "-1.0", True), ("tensor(nan)", "nan", True), ("-nan", "nan", False),
])  # fmt: skip
def test_a_fragment_is_found_whole_not_inside_a_longer_name_or_number(
    printed: str, fragment: str, found: bool
) -> None:
    """`stdout_contains: [float]` proved a right choice saying float32 over a run that printed
    bfloat16 (an AMP expert's planted key), and `float16` is inside `bfloat16`; `inf` proved a
    choice saying +inf over a run that printed -inf (a sign is part of the number)."""
    assert printed_contains(printed, fragment) is found


def test_a_key_that_only_a_longer_word_matches_fails() -> None:
    run = RunResult(status="ok", stdout="torch.bfloat16\n")
    problems, _ = check_expect(Expect(stdout_contains=["float16"]), run)
    assert problems == ["printed text does not contain 'float16'"]
    assert check_expect(Expect(stdout_contains=["bfloat16"]), run)[0] == []


def test_a_key_a_torch_release_changed_is_proved_only_by_a_run_on_the_releases_it_names() -> None:
    """On torch 2.11 (an H200) nn.RMSNorm under CUDA autocast printed float16, 2.12 put rms_norm on
    the float32 list: a run on 2.11 contradicted a key right for the pinned 2.13, and a question
    runnable there would have been recorded as failed. It is not run there, and the record says why."""
    question = PredictOutputQuestion(
        id="q", topic="t", difficulty=1, prompt="p", explanation="e", source="s", kind="predict_output",
        code="print(1)", answer="1", requires="cuda", torch_versions=">=2.12",
    )  # fmt: skip
    assert (
        skip_reason(question, "cuda", "2.11.0")
        == "its key is what torch >=2.12 does; this host runs torch 2.11.0"
    )
    for newer in ("2.12.0", "2.13.0", "2.13.0+cu130", "2.14.0.dev20261101"):
        assert skip_reason(question, "cuda", newer) is None, newer
    assert (
        skip_reason(question.model_copy(update={"torch_versions": None}), "cuda", "2.11.0") is None
    )


def test_an_answer_is_proved_only_by_a_run_that_prints_it_not_by_an_accepted_spelling() -> None:
    """`answer: torch.float16` with `accept: [torch.bfloat16]` over code printing bfloat16 passed
    (a planted key): the page then said "It prints torch.float16" above a run printing bfloat16.
    `accept` lists other spellings a learner may type; the answer is what the code prints."""
    from app.bank.load import LoadedQuestion
    from app.verify.check import check

    def checked(answer: str, accept: list[str]) -> str:
        question = PredictOutputQuestion(
            id="q", topic="t", difficulty=1, prompt="p", explanation="e", source="s", kind="predict_output",
            code="print(1)", answer=answer, accept=accept,
        )  # fmt: skip
        loaded = LoadedQuestion(question=question, set_id="s", path="s.yaml", line=1)
        return check(loaded, RunResult(status="ok", stdout="torch.bfloat16\n"), "cpu").result

    assert checked("torch.float16", ["torch.bfloat16"]) == "fail"
    assert checked("torch.bfloat16", ["bfloat16"]) == "pass"
