"""Loading the bank: which file a duplicate id leaves out, and the keys lint warns about
(pure Python over files in a temporary folder; milliseconds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.bank.lint import underivable
from app.bank.load import load_bank, load_text


def one_question(qid: str, marker: str) -> str:
    return f"""\
title: Set {marker}
description: d
questions:
  - id: {qid}
    kind: predict_output
    topic: t
    difficulty: 1
    prompt: {marker}
    code: print(1)
    answer: "1"
    explanation: e
    source: s
"""


def write(folder: Path, name: str, text: str, mtime: int) -> Path:
    path = folder / name
    path.write_text(text)
    os.utime(path, ns=(mtime, mtime))
    return path


def test_the_newer_file_is_left_out_whatever_the_names(tmp_path: Path) -> None:
    write(tmp_path, "zz-old.yaml", one_question("shared-id", "OLD"), 1_000_000_000)
    write(tmp_path, "aa-new.yaml", one_question("shared-id", "NEW"), 2_000_000_000)
    bank = load_bank(tmp_path)
    assert [s.id for s in bank.sets] == ["zz-old"]
    assert bank.question("shared-id").question.prompt == "OLD"
    (problem,) = bank.problems
    assert problem.path.endswith("aa-new.yaml") and "zz-old.yaml:4" in problem.message


def test_the_file_that_served_the_id_before_keeps_it(tmp_path: Path) -> None:
    old = write(tmp_path, "b.yaml", one_question("shared-id", "SERVED"), 2_000_000_000)  # newer...
    write(tmp_path, "a.yaml", one_question("shared-id", "NEW"), 1_000_000_000)
    bank = load_bank(tmp_path, incumbents={"shared-id": str(old)})  # ...but it was being served
    assert bank.question("shared-id").question.prompt == "SERVED"
    assert bank.problems[0].path.endswith("a.yaml")


@pytest.mark.parametrize(
    ("number", "hard"),
    [("0.2448", True), ("9.1553e-06", True), ("3.3895313892515355e+38", True), ("22032.", False),
     ("65504.0", False), ("0.0009765625", False), ("1.0001", False), ("458752.0", False), ("0.6000", False)],
)  # fmt: skip
def test_keys_no_one_could_type_are_warned_about(number: str, hard: bool) -> None:
    assert underivable(number) is hard


def test_the_live_bank_keeps_what_it_served_when_a_newer_file_takes_an_id(tmp_path: Path) -> None:
    from app.verify.live_bank import LiveBank

    write(tmp_path, "b-served.yaml", one_question("shared-id", "SERVED"), 1_000_000_000)
    live = LiveBank(tmp_path, check_every_s=0)
    assert live.current().question("shared-id").question.prompt == "SERVED"
    # the served file is edited (now the newest), and a new file takes its id
    write(tmp_path, "a-new.yaml", one_question("shared-id", "NEW"), 2_000_000_000)
    write(tmp_path, "b-served.yaml", one_question("shared-id", "SERVED AGAIN"), 3_000_000_000)
    bank = live.current()
    assert bank.question("shared-id").question.prompt == "SERVED AGAIN"
    assert [p.path for p in bank.problems] == [str(tmp_path / "a-new.yaml")]


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [1, 2.5, true, null, ~, 2020-01-02, 0x10, 1_000, yes, 'yes', .inf]\n",
        "other:\n  <<: {x: 1}\n  y: 2\n",  # a merge key (of an alias, it is refused: the mapping is shared)
        "a: &s hello\nb: *s\n",
        "? [1, 2]\n: 3\n",  # an unhashable key: PyYAML's error
        "a: !!binary aGVsbG8=\nb: !!set {x, y}\nc: !!omap [x: 1]\n",
        "a: !foo bar\n",  # an unknown tag: PyYAML's error
        "1: one\n2.5: two\nnull: three\ntrue: four\n",
        "- a\n- b: {c: [d, {e: f}]}\n",
        "a: !!str 12\nb: !!int '12'\n",
        "= : 1\n",
        # scalars each resolver tells apart, plain and quoted, some twice (the second is looked up)
        (
            "a: ''\nb:\nc: '1'\nd: 1e3\ne: 0o17\nf: -.inf\ng: Yes\nh: 2001-12-14t21:59:43.10-05:00\ni: ~\n"
            "j: 1.5e+3\nk: [1e3, '1e3', \"1e3\", NO, No, null, Null, 0b101, +12, .NaN, 1_0.5, 'true', true]\n"
        ),
    ],
)
def test_files_are_built_as_pyyaml_builds_them(text: str) -> None:
    """The loader's own walk builds what PyYAML builds (or fails where it fails)."""
    import yaml

    from app.bank.yaml_tree import parse_yaml

    try:
        expected: object = yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        expected = "an error"
    parsed, problems = parse_yaml(text, "t.yaml")
    assert repr(parsed.data if parsed else problems and "an error") == repr(expected), problems


def test_a_web_process_starts_from_the_preloaded_bank_and_reads_only_changed_files(
    tmp_path: Path,
) -> None:
    """What `serve --processes N` reads once before forking its web processes: a bank of that
    folder starts from it, and reads again only the file changed since; another folder's does not."""
    from app.bank import load
    from app.verify.live_bank import _PRELOADED, LiveBank, preload

    bank = tmp_path / "bank"
    bank.mkdir()
    write(bank, "a.yaml", one_question("qa", "A"), 1_000_000_000)
    write(bank, "b.yaml", one_question("qb", "B"), 1_000_000_000)
    preload(bank)
    try:
        write(bank, "b.yaml", one_question("qb", "B, edited since"), 2_000_000_000)
        other = tmp_path / "other"
        other.mkdir()
        write(other, "a.yaml", one_question("qa", "elsewhere"), 1_000_000_000)
        read: list[str] = []
        real = load.load_file

        def counting(path: Path, display: str | None = None):  # type: ignore[no-untyped-def]
            read.append(path.name)
            return real(path, display)

        load.load_file = counting  # type: ignore[assignment]
        try:
            live = LiveBank(bank)
            assert read == ["b.yaml"]
            assert LiveBank(other).bank.question("qa").question.prompt == "elsewhere"
            assert read == ["b.yaml", "a.yaml"]
        finally:
            load.load_file = real  # type: ignore[assignment]
        assert live.bank.question("qa").question.prompt == "A"
        assert live.bank.question("qb").question.prompt == "B, edited since"
    finally:
        _PRELOADED.clear()


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        (
            "a0: &a0 [x, x]\n"
            + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, 22)),
            (1, 5),
            "used again through an alias",
        ),
        ("title: t\n? [1, 2]\n: x\n", (2, 3), "a key must be a plain word"),
        ("title: t \ud800\n", (1, 1), "not Unicode text"),
    ],
    ids=["aliases-doubling-21-times", "a-list-as-a-key", "a-lone-surrogate"],
)
def test_text_no_question_file_could_be_is_a_problem_at_its_line_not_a_crash_or_a_stall(
    text: str, where: tuple[int, int], says: str
) -> None:
    """Each crashed the loader (a list as a key, a surrogate typed in the studio) or walked 2**21
    leaves (aliases doubling at each level: seconds of the event loop for a few hundred bytes, and 2**40 for 40 levels)."""
    loaded, problems = load_text(text, "x", "x.yaml")
    assert loaded is None and len(problems) == 1
    assert (problems[0].line, problems[0].col) == where and says in problems[0].message, problems


SWAPPED = """\
title: Swapped
description: d
questions:
  - id: swapped-texts
    kind: multiple_choice
    topic: t
    difficulty: 1
    prompt: What happens?
    code: |
      import torch
      print(torch.ones(1, dtype=torch.bfloat16).dtype)
    choices:
      - text: It prints `torch.float32`, because type promotion picks the wider type.
        correct: true
        why: w
        outcome: {stdout: torch.bfloat16}
      - text: It prints `torch.bfloat16`.
        correct: false
        why: w
        outcome: {raises: RuntimeError}
      - text: A `TypeError` about the dtype.
        correct: false
        why: w
        outcome: {raises: RuntimeError}
      - text: A `RuntimeError` saying the dtypes differ.
        correct: false
        why: w
        outcome: {stdout: torch.float32}
      - text: It prints `torch.half`, the same dtype as float16.
        correct: false
        why: w
        outcome: {stdout: torch.float16}
      - text: "No exception: the ones are promoted as `+` would."
        correct: false
        why: w
        outcome: {raises: RuntimeError}
      - text: It prints it silently.
        correct: false
        why: w
        outcome: {stdout: torch.bfloat16, warns: UserWarning}
    explanation: e
    source: s
"""


def test_a_choice_whose_words_say_another_thing_than_its_outcome_is_warned_about(
    tmp_path: Path,
) -> None:
    """A run checks a choice's outcome; the learner reads its words. Texts swapped between the
    right choice and a wrong one (the right one now reading "It prints torch.float32" over an
    outcome that raises or prints bfloat16) passed lint and verify, and were graded. Each kind
    of mismatch is named at the question's line; a text that agrees with its outcome is not."""
    write(tmp_path, "swapped.yaml", SWAPPED, 1_000_000_000)
    bank = load_bank(tmp_path)
    said = [w.message for w in bank.warnings]
    assert all(w.line == 4 for w in bank.warnings)
    assert said == [
        "warning: [swapped-texts] choice 1's text names float32, but its outcome prints bfloat16: does the text say what the run does?",
        "warning: [swapped-texts] choice 2's text says the code prints, but its outcome raises RuntimeError: does the text say what the run does?",
        "warning: [swapped-texts] choice 3's text names TypeError, but its outcome is RuntimeError: does the text say what the run does?",
        "warning: [swapped-texts] choice 4's text names RuntimeError, but its outcome raises nothing: does the text say what the run does?",
        "warning: [swapped-texts] choice 6's text says the code ends without an error, but its outcome raises RuntimeError: does the text say what the run does?",
        "warning: [swapped-texts] choice 7's text says the code runs without a warning, but its outcome warns UserWarning: does the text say what the run does?",
    ]


def test_a_right_choice_far_longer_than_every_wrong_one_is_warned_about(tmp_path: Path) -> None:
    """Picking the longest choice scored without knowing AMP: in the bank the right choice was the
    longest in 59 of 73 questions, by half again or more in 38."""
    long_right = SWAPPED.replace("It prints `torch.float32`, because type promotion picks the wider type.",
                                 "It prints `torch.bfloat16`, " + "the dtype of the autocast region, as every detail here says " * 3)  # fmt: skip
    write(tmp_path, "long.yaml", long_right, 1_000_000_000)
    said = [w.message for w in load_bank(tmp_path).warnings if "times as long" in w.message]
    assert said == [("warning: [swapped-texts] the right choice is 4.1 times as long as the longest wrong one, so the longest "
                    "is the one to pick: move its detail into its `why`, or give the wrong ones as much")], said  # fmt: skip
    write(tmp_path, "long.yaml", SWAPPED, 2_000_000_000)  # as long as the others: nothing said
    assert not [w for w in load_bank(tmp_path).warnings if "times as long" in w.message]


def test_a_torch_range_that_is_no_version_range_is_a_problem_at_its_line() -> None:
    text = one_question("ranged", "r").replace(
        '    answer: "1"\n', '    answer: "1"\n    torch_versions: "2.12 or later"\n'
    )
    loaded, problems = load_text(text, "x", "x.yaml")
    assert loaded is None or not loaded.questions, problems
    assert [(p.line, "'2.12 or later' is not a version range" in p.message) for p in problems] == [
        (11, True)
    ], problems
    loaded, problems = load_text(text.replace("2.12 or later", ">=2.12"), "x", "x.yaml")
    assert (
        problems == []
        and loaded is not None
        and loaded.questions[0].question.torch_versions == ">=2.12"
    )


def test_the_real_banks_words_to_learners_never_speak_of_its_own_sources() -> None:
    """The bank was drafted from "seed" documents; seven texts said "the seed's comment", "what the
    seed means by" to learners, who never saw one (a newcomer's walk). The `source:` field keeps
    the provenance, for instructors."""
    import re

    from tests.support.cli import REPO

    jargon = re.compile(r"\bthe seed\b|\bseed's\b|\bseed claims?\b|\bseeds/", re.IGNORECASE)
    bank = load_bank(REPO / "questions")
    said: list[str] = []
    for loaded_set in bank.sets:
        said += [
            f"{loaded_set.path}: {loaded_set.model.title} {loaded_set.model.description or ''}"
        ]
    for q in bank.questions:
        texts = [q.question.title or "", q.question.prompt, q.question.explanation or ""]
        texts += [f"{c.text} {c.why}" for c in getattr(q.question, "choices", [])]
        said += [f"{q.id}: {text}" for text in texts]
    assert [text for text in said if jargon.search(text)] == []


def test_an_empty_answer_is_refused_at_its_line(tmp_path: Path) -> None:
    """Code that prints nothing got a key proved as '' that no learner could type (an empty
    prediction is refused): the file is refused, at the answer's line, saying what to do."""
    write(
        tmp_path,
        "empty.yaml",
        one_question("prints-nothing", "m").replace('answer: "1"', "answer: ''"),
        1,
    )
    bank = load_bank(tmp_path)
    assert bank.questions == []
    (problem,) = bank.problems
    assert (
        (problem.line, problem.col) == (10, 13)
        and "is empty" in problem.message
        and "use its output" in problem.message
    ), problem


@pytest.mark.parametrize(
    "text", ["FP16, like CUDA", "Float32: Linear is not on the list", "FP32, as it was written"]
)
def test_dtypes_as_prose_writes_them_are_read_too(text: str) -> None:
    """A right choice reading "FP16, like CUDA" over an outcome of bfloat16 passed the words check
    (it read only lowercase dtype names)."""
    from app.bank.lint import words_against_key
    from app.bank.schema import MultipleChoiceQuestion

    q = MultipleChoiceQuestion.model_validate({
        "id": "q", "kind": "multiple_choice", "topic": "t", "difficulty": 1, "prompt": "p", "code": "print(1)",
        "explanation": "e", "source": "s",
        "choices": [{"text": text, "correct": True, "why": "w", "outcome": {"stdout": "torch.bfloat16"}},
                    {"text": "something else", "correct": False, "why": "w"}],
    })  # fmt: skip
    said = words_against_key(q)
    assert said and "but its outcome prints bfloat16" in said[0], said


@pytest.mark.parametrize(("change", "said"), [
    ("stdout_contains: [x]", "an empty fragment is found in any run"),
    ("requires: cpu\n    device: cuda", "make them agree"),
])  # fmt: skip
def test_a_key_no_run_could_prove_is_refused(tmp_path: Path, change: str, said: str) -> None:
    """`stdout_contains: [""]` is in every printed text, and `requires: cpu` with `device: cuda`
    asks what the code does where it never runs: both were "proved" or graded (a review's plants)."""
    text = one_question("weak", "m")
    if change.startswith("stdout_contains"):
        text = text.replace("    kind: predict_output", "    kind: multiple_choice").replace(
            '    answer: "1"\n',
            (
                "    choices:\n      - {text: one, correct: true, why: w, outcome: {stdout_contains: ['']}}\n"
                "      - {text: two, correct: false, why: w}\n"
            ),
        )
    else:
        text = text.replace("    code: print(1)\n", "    code: print(1)\n    " + change + "\n")
    write(tmp_path, "weak.yaml", text, 1)
    bank = load_bank(tmp_path)
    assert bank.questions == [] and any(said in p.message for p in bank.problems), bank.problems
