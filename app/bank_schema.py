"""The question bank's format, defined once as pydantic models.

Everything else derives from these models: the loader validates YAML against them, `ampquiz schema`
emits their JSON Schema for editors, and `ampquiz export` dumps them.

Authors: a complete example and the authoring rules follow (the README repeats them).

## The question-bank YAML format (defined by pydantic models in /work/main/app/bank_schema.py — read it)
One file per question set under `questions/`; the set id is the file name without `.yaml`.
```yaml
title: Autocast basics                 # set title
description: What autocast does, where it applies, and what it leaves alone.
questions:
  - id: cpu-autocast-linear-default-dtype   # slug, unique across the WHOLE bank
    kind: predict_output                    # or multiple_choice
    topic: autocast-basics                  # slug
    difficulty: 1                           # 1..3
    prompt: |                               # Markdown; do not repeat the code here, it is shown separately
      What does this print?
    code: |                                 # optional for multiple_choice, required for predict_output
      import torch
      layer = torch.nn.Linear(4, 2)
      with torch.autocast("cpu"):
          print(layer(torch.ones(1, 4)).dtype)
    requires: cpu                           # cpu | cuda | any : where the code can run
    answer: torch.bfloat16                  # predict_output: EXACT printed stdout (line endings + trailing whitespace normalised)
    accept: []                              # optional other acceptable spellings
    device_answers: {}                      # optional, e.g. {cuda: "torch.float16"} when a `requires: any` snippet prints differently on CUDA
    explanation: |                          # Markdown: why; cite what execution shows
      ...
    source: seeds/003_eee269cef78c8110.txt  # the seed file it comes from, or a documentation reference (e.g. "docs: torch.amp autocast op reference")
    tags: [cpu, bfloat16, linear]
  - id: gradscaler-step-without-scale
    kind: multiple_choice
    topic: gradscaler
    difficulty: 2
    prompt: |
      What happens when this runs?
    code: |
      ...
    requires: cpu
    choices:                                # >= 2, at least one correct: true; each has `why` (feedback when picked)
      - text: "An `AssertionError` saying `_scale is None`"
        correct: true
        why: "..."
      - text: "It trains normally"
        correct: false
        why: "..."
    expect:                                 # REQUIRED when a multiple_choice question has code: what the run must show
      raises: AssertionError                # exception class name (bare, e.g. RuntimeError, ValueError, TypeError)
      message: "_scale is None"             # fragment of the exception message (needs raises)
      # stdout: "exact printed text"        # or: stdout_contains: ["fragment", ...]
      # warns: FutureWarning                # warning category name; warning_message: "fragment"
    device_expect: {}                       # optional per-device override, e.g. {cuda: {...}}
    explanation: ...
    source: seeds/000_71b29d88a740d8a3.txt
    tags: [gradscaler, errors]
```
Rules:
- Quote YAML strings that look like booleans/numbers (`"yes"`, `"1.0"`, `"65504"`): fields are strings.
- `answer` is compared with what the snippet prints on stdout (each line's trailing whitespace stripped, trailing blank lines dropped). Don't print anything random (seed with `torch.manual_seed(0)` or use fixed tensors); avoid printing memory addresses, timings, file paths.
- Snippets run in a sandbox: a fresh Python process with torch imported, a temp working directory, no network, ~10 s wall time, 1 GiB memory. Keep each snippet small and fast (< 1 s on a CPU). Warnings are captured separately (not on stdout). `print` output is what counts.
- `requires: cpu` — the code uses the CPU only (it will also run on a CUDA host, where the CPU is present). `requires: cuda` — the code needs a GPU (we have none here: such answers cannot be run here; they will be verified later on a GPU host, so derive them carefully from /work/shared/amp-facts.md, whose (sim) rows were measured with the real CUDA autocast kernels). `requires: any` — the code picks `device = "cuda" if torch.cuda.is_available() else "cpu"` and must be correct on both (give `device_answers`/`device_expect` where output differs).
- Every answer of a cpu/any question MUST be established by running the code here with `/work/main/.venv/bin/python` (torch 2.13.0 CPU). Check with `/work/main/.venv/bin/ampquiz lint questions/` (must report 0 errors) and a throwaway checker script in /tmp that, for each question with code and requires != cuda, runs the code in a subprocess (`/work/main/.venv/bin/python -c CODE`, cwd a temp dir) and compares normalised stdout to `answer`, or checks `expect` (exception type name appears in stderr's last line, message fragment in stderr, stdout, warnings in stderr). `ampquiz export questions/ --format json` gives you the parsed bank as JSON for such a script.
- Conceptual multiple-choice questions (no code) are fine for "what is / why" questions; but prefer code whenever the claim can be checked by running it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$", max_length=80)]
NonEmpty = Annotated[str, StringConstraints(min_length=1, strip_whitespace=False)]
Device = Literal["cpu", "cuda"]
Requires = Literal["cpu", "cuda", "any"]


class Strict(BaseModel):
    """Unknown fields are errors: a typo like `anwser` must not be silently ignored."""

    model_config = ConfigDict(extra="forbid")


class Choice(Strict):
    text: NonEmpty = Field(description="Markdown shown as the choice.")
    correct: bool = Field(description="Whether picking this choice is right.")
    why: NonEmpty = Field(description="Feedback shown when a learner picks this choice.")


class Expect(Strict):
    """What running a multiple-choice question's code must show, so its key is checked by execution."""

    raises: str | None = Field(
        None, description="Exception type name the code must raise, e.g. AssertionError."
    )
    message: str | None = Field(None, description="Fragment the exception message must contain.")
    stdout: str | None = Field(
        None, description="Exact printed text (line endings and trailing whitespace normalised)."
    )
    stdout_contains: list[str] = Field(
        default_factory=list, description="Fragments the printed text must contain."
    )
    warns: str | None = Field(None, description="Warning category the run must emit, e.g. FutureWarning.")
    warning_message: str | None = Field(None, description="Fragment that warning's message must contain.")

    @model_validator(mode="after")
    def _says_something(self) -> Expect:
        if not (self.raises or self.message or self.stdout is not None or self.stdout_contains or self.warns):
            raise ValueError("expect must state at least one of raises, message, stdout, stdout_contains, warns")
        if self.message and not self.raises:
            raise ValueError("expect.message needs expect.raises (the exception type)")
        if self.warning_message and not self.warns:
            raise ValueError("expect.warning_message needs expect.warns (the warning category)")
        return self


class QuestionBase(Strict):
    id: Slug = Field(description="Unique across the whole bank; lowercase words joined by '-'.")
    topic: Slug = Field(description="Topic slug, e.g. autocast-basics.")
    difficulty: int = Field(ge=1, le=3, description="1 (warm-up) to 3 (hard).")
    prompt: NonEmpty = Field(description="The question, in Markdown.")
    explanation: NonEmpty = Field(description="Why the answer is what it is, in Markdown.")
    source: NonEmpty = Field(description="Seed file the question comes from, or a documentation reference.")
    tags: list[Slug] = Field(default_factory=list)
    code: str | None = Field(None, description="Python snippet; runs in the sandbox.")
    requires: Requires = Field("any", description="Where the code can run: cpu, cuda or any.")


class MultipleChoiceQuestion(QuestionBase):
    kind: Literal["multiple_choice"]
    choices: list[Choice] = Field(min_length=2)
    expect: Expect | None = Field(None, description="Required when there is code.")
    device_expect: dict[Device, Expect] = Field(
        default_factory=dict, description="Per-device override of expect, where output differs by device."
    )

    @model_validator(mode="after")
    def _checks(self) -> MultipleChoiceQuestion:
        if not any(c.correct for c in self.choices):
            raise ValueError("a multiple-choice question needs at least one choice with correct: true")
        if self.code and self.expect is None:
            raise ValueError("a multiple-choice question with code needs an expect block")
        if self.expect is not None and not self.code:
            raise ValueError("expect without code: there is nothing to run")
        return self


class PredictOutputQuestion(QuestionBase):
    kind: Literal["predict_output"]
    code: NonEmpty = Field(description="Python snippet whose printed output the learner predicts.")
    answer: str = Field(description="Exact text the code prints.")
    accept: list[str] = Field(default_factory=list, description="Other acceptable spellings.")
    device_answers: dict[Device, str] = Field(
        default_factory=dict, description="What the code prints on a given device, where that differs."
    )


Question = Annotated[MultipleChoiceQuestion | PredictOutputQuestion, Field(discriminator="kind")]


class QuestionSet(Strict):
    title: NonEmpty
    description: NonEmpty
    questions: list[Question] = Field(min_length=1)


def json_schema() -> dict:
    """JSON Schema of one question-set file, for editors' YAML language servers."""
    schema = QuestionSet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "ampquiz question set"
    return schema
