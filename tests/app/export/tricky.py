"""A small bank written for the export tests: every text carries what an export format could
mangle (GIFT's `~ = # { } :`, `<script>`, `&`, non-ASCII, a code line starting `//`, a blank line
in code, a backslash escape in a string, `*` in a printed output), and the values each text must
read back as, written out by hand."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from app.bank.load import Bank, LoadedQuestion, load_bank
from app.verify.record import Record, question_hash

SET_A = "tricky"
SET_A_TITLE = "Braces {and} colons: a/b ~ = # — ünïcode"
SET_B = "plain"
SET_B_TITLE = "Plain set"

CODE_BRACES = """import torch
d = {"a": 1, "b:c": 2}  # a dict {with braces} ~ = #
y = (10
     // 3)

print(f"{d['a']}\\t{len(d)} <b> & </b>", "line\\nbreak")
"""
"""The code as its YAML holds it (a real tab escape `\\t` and `\\n` inside the strings)."""

PROMPT_A = (
    "Which `{key}` = value ~ holds? # not a heading <script>alert('x')</script> — naïve café 日本"
)
PROMPT_A_TEXT = (
    "Which {key} = value ~ holds? # not a heading <script>alert('x')</script> — naïve café 日本"
)

CHOICES_A = [
    ("`{1: 2}` ~ the dict", "`=` means: **right** #1 {yes}", True),
    ("a -> b & c < d", "~ not this: <i>no</i> ü", False),
    ("%50% plain #hash", "Feedback: colon", False),
]
CHOICES_A_TEXT = [
    ("{1: 2} ~ the dict", "= means: right #1 {yes}"),
    ("a -> b & c < d", "~ not this: <i>no</i> ü"),
    ("%50% plain #hash", "Feedback: colon"),  # GIFT would read a leading %50% as a weight
]
EXPLANATION_A_TEXT = "Because {braces} = dict: see ~here~ #1."

CHOICES_MULTI = [
    ("first = right", True),
    ("second ~ wrong", False),
    ("third {right}", True),
    ("fourth: wrong", False),
]

ANSWER_STAR = "a = {1: 2}\n~# done *\n"
SHORT_STAR = "a = {1: 2} / ~# done *"
"""The multi-line output as the exports' one short-answer line (lines joined by ` / `)."""

ANSWER_TOL = "tensor([0.3333])"
ACCEPT_TOL = "tensor([0.33333])"
CUDA_TOL = "tensor([0.3333], device='cuda:0')"

RIGHT_OUTCOME = "        outcome: {stdout_contains: ['1']}\n"
"""What a right choice of the first question says its run prints."""

BANK_A = f"""title: {json.dumps(SET_A_TITLE)}
description: "Tricky text: {{ }} = ~ # : <script>x</script>"
questions:
  - id: mc-single-tricky
    title: {json.dumps("Title with :: colons {braces} = ~ #")}
    kind: multiple_choice
    topic: autocast-basics
    difficulty: 2
    prompt: {json.dumps(PROMPT_A)}
    code: {json.dumps(CODE_BRACES)}
    requires: cpu
    choices:
{
    "".join(
        f'''      - text: {json.dumps(t)}
        correct: {str(c).lower()}
        why: {json.dumps(w)}
'''
        + (RIGHT_OUTCOME if c else "")
        for t, w, c in CHOICES_A
    )
}    expect:
      stdout_contains: ["1"]
    explanation: "Because `{{braces}}` = dict: see ~here~ #1."
    source: tests
  - id: mc-multiple-conceptual
    kind: multiple_choice
    topic: gradscaler
    difficulty: 1
    prompt: Pick every right one.
    shuffle: false
    choices:
{
    "".join(
        f'''      - text: {json.dumps(t)}
        correct: {str(c).lower()}
        why: {json.dumps("why " + t)}
'''
        for t, c in CHOICES_MULTI
    )
}    explanation: Two are right.
    source: tests
  - id: 7-star-output
    kind: predict_output
    topic: op-dtypes
    difficulty: 3
    prompt: What does it print?
    code: |
      print("a = {{1: 2}}")
      print("~# done *")
    requires: any
    answer: {json.dumps(ANSWER_STAR)}
    explanation: It prints two lines.
    source: tests
  - id: tolerance-output
    kind: predict_output
    topic: float16-numerics
    difficulty: 2
    prompt: "What does it print? (numbers: close enough counts)"
    code: |
      import torch
      print(torch.tensor([1/3]).round(decimals=4))
    requires: cpu
    answer: {json.dumps(ANSWER_TOL)}
    accept: [{json.dumps(ACCEPT_TOL)}]
    tolerance: {{rel: 0.002}}
    device_answers: {{cuda: {json.dumps(CUDA_TOL)}}}
    explanation: One third, rounded.
    source: tests
"""

BANK_B = """title: Plain set
description: Nothing odd.
questions:
  - id: plain-cuda-only
    kind: predict_output
    topic: autocast-basics
    difficulty: 1
    prompt: What does it print on CUDA?
    code: |
      print(1)
    requires: cuda
    answer: "1"
    explanation: It prints 1.
    source: tests
"""

PROOF_PASS = "Answer verified by running on CPU · torch 2.13.0 · 2026-11-22"
PROOF_STARTS = ("Answer verified ", "Answer not proved by running: ", "Conceptual — no code to run")
"""How every default proof line begins: a pass from a record, why not, or no code."""


def write_bank(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{SET_A}.yaml").write_text(BANK_A, encoding="utf-8")
    (folder / f"{SET_B}.yaml").write_text(BANK_B, encoding="utf-8")
    return folder


def load(folder: Path) -> Bank:
    bank = load_bank(write_bank(folder))
    assert not bank.problems, bank.problems
    return bank


def write_record(folder: Path, bank: Bank, passed: set[str]) -> None:
    """A committed CPU record that passes the ids in `passed`."""
    results = {
        q.id: {"result": "pass", "hash": question_hash(q.question)}
        for q in bank.questions
        if q.id in passed
    }
    env = {
        "torch_version": "2.13.0",
        "device_kind": "cpu",
        "device_name": "x",
        "date": "2026-11-22T10:00:00+00:00",
    }
    (folder / "verified").mkdir(exist_ok=True)
    (folder / "verified" / "cpu-torch2.13.0.json").write_text(
        Record(Path("x"), env, results).to_json()
    )


def proof_for(loaded: LoadedQuestion) -> str:
    """The proof line the tests pass in: says whose it is, so each one can be found."""
    return f"Proof for {loaded.id} <&> {{:}}"


def html_fragment(markup: str) -> ET.Element:
    """An HTML fragment an export wrote (XHTML-compatible), parsed by the standard library."""
    return ET.fromstring(f"<div>{markup}</div>")


def text_of(markup: str) -> str:
    """What a reader sees of an HTML fragment: its text, white space runs as one space."""
    return " ".join("".join(html_fragment(markup).itertext()).split())


def last_paragraph(markup: str) -> str:
    """The general feedback's last paragraph: where the proof line goes."""
    return flat("".join(html_fragment(markup).findall("p")[-1].itertext()))


def code_blocks(markup: str) -> list[str]:
    return ["".join(pre.itertext()) for pre in html_fragment(markup).iter("pre")]


def flat(text: str) -> str:
    return " ".join(text.split())


def words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z0-9]+", text))
