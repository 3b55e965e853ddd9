"""`ampquiz lint`: every problem as file:line:col, exit 1, and a bad file never half-loads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from app.bank import load_bank
from tests.support.cli import ampquiz

GOOD = """\
title: Sample
description: A small set.
questions:
  - id: sample-linear
    kind: predict_output
    topic: autocast-basics
    difficulty: 1
    prompt: What does this print?
    code: |
      print("torch.bfloat16")
    requires: cpu
    answer: torch.bfloat16
    explanation: Because.
    source: seeds/003_eee269cef78c8110.txt
    tags: [cpu]
  - id: sample-choice
    kind: multiple_choice
    topic: gradscaler
    difficulty: 2
    prompt: Which is right?
    choices:
      - {text: This one, correct: true, why: Right.}
      - {text: That one, correct: false, why: Wrong.}
    explanation: Because.
    source: seeds/000_71b29d88a740d8a3.txt
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_file_loads(tmp_path: Path) -> None:
    write(tmp_path, "sample.yaml", GOOD)
    out = ampquiz("lint", str(tmp_path))
    assert out.returncode == 0, out.stdout
    assert "2 questions in 1 sets, 0 errors" in out.stdout


@pytest.mark.parametrize(
    ("broken", "where", "words"),
    [
        (
            GOOD.replace("    requires: cpu\n", "    requires: [cpu\n"),
            ":12:11:",
            "YAML syntax error: while parsing a flow sequence (opened at line 11)",
        ),
        (
            GOOD.replace("id: sample-choice", "id: sample-linear"),
            ":16:5:",
            "duplicate id 'sample-linear'",
        ),
        (
            GOOD.replace("    answer: torch.bfloat16\n", ""),
            ":4:5:",
            "[sample-linear] missing required field 'answer'",
        ),
        (
            GOOD.replace("requires: cpu", "requires: gpu"),
            ":11:15:",
            "requires: Input should be 'cpu', 'cuda' or 'any'",
        ),
        (
            GOOD.replace("correct: true", "correct: false"),
            ":16:5:",
            "at least one choice with correct: true",
        ),
        (
            GOOD.replace("    tags: [cpu]\n", "    tags: [cpu]\n    anwser: x\n"),
            ":16:5:",
            "[sample-linear] unknown field 'anwser'",
        ),
        (
            GOOD.replace("source: seeds/000_71b29d88a740d8a3.txt", 'source: ""'),
            ":25:13:",
            "source: say where the question comes from",
        ),
        (GOOD.replace("why: Right.", "why: yes"), ":22:46:", "put the text in quotes"),
        # Where the author must change it, and how (libyaml gave up on the line after, or below).
        (
            GOOD.replace("answer: torch.bfloat16", "answer:torch.bfloat16"),
            ":12:5:",
            "put a space after the colon: `answer: torch.bfloat16`",
        ),
        (
            GOOD.replace('      print("torch.bfloat16")', '    print("torch.bfloat16")'),
            ":10:5:",
            "indent it as far as the code's first line",
        ),
        (
            GOOD.replace("    topic: gradscaler", "\ttopic: gradscaler"),
            ":18:1:",
            "indent with spaces",
        ),
        (
            GOOD.replace("prompt: Which is right?", "prompt: Which: is right?"),
            ":20:18:",
            "must be in quotes",
        ),
        (
            GOOD.replace("prompt: Which is right?", 'prompt: "Which is right?'),
            ":20:13:",
            "the quote that opens here is never closed",
        ),
        (
            GOOD.replace("kind: multiple_choice", "kind: multiple-choice"),
            ":17:11:",
            "kind must be one of",
        ),
    ],
    ids=[
        "syntax",
        "duplicate-id",
        "missing-field",
        "bad-requires",
        "no-correct-choice",
        "unknown-field",
        "empty-source",
        "yaml-boolean",
        "no-space-after-colon",
        "dedented-code",
        "tab",
        "colon-in-value",
        "open-quote",
        "bad-kind",
    ],
)
def test_broken_file_gives_file_line_col_and_exit_1(
    tmp_path: Path, broken: str, where: str, words: str
) -> None:
    path = write(tmp_path, "broken.yaml", broken)
    out = ampquiz("lint", str(tmp_path))
    assert out.returncode == 1
    first = out.stdout.splitlines()[0]
    assert first.startswith(f"{path}{where}"), out.stdout
    assert words in first, out.stdout
    assert "0 questions in 0 sets" in out.stdout  # a bad file never half-loads


def test_duplicate_id_across_files_points_at_both(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD)
    write(tmp_path, "b.yaml", GOOD.replace("sample-choice", "other-choice"))
    out = ampquiz("lint", str(tmp_path))
    assert out.returncode == 1
    assert (
        f"{tmp_path / 'b.yaml'}:4:5: duplicate id 'sample-linear' (first defined at {tmp_path / 'a.yaml'}:4"
        in out.stdout
    )
    assert "2 questions in 1 sets, 1 error" in out.stdout


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    broken = GOOD.replace("requires: cpu", "requires: gpu").replace(
        "difficulty: 2", "difficulty: 7"
    )
    write(tmp_path, "broken.yaml", broken)
    bank = load_bank(tmp_path)
    assert [p.line for p in sorted(bank.problems)] == [11, 19]
    assert bank.questions == []
