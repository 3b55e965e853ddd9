"""The question bank's format, defined once as pydantic models.

Everything else derives from these models: the loader validates YAML against them, `ampquiz schema`
emits their JSON Schema for editors, and `ampquiz export` dumps them.

Authors: README.md, "Writing questions", has a complete example and the rules the linter enforces.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Annotated, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from app.bank.text_rule import first_text_problem
from app.bank.torch_range import TorchRange

Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$", max_length=80)]
NonEmpty = Annotated[str, StringConstraints(min_length=1, strip_whitespace=False)]

STARTER_EXPLANATION = "Why it prints what it prints."
"""The explanation the studio's new question starts with (`app.bank.edit`)."""
STARTER_DESCRIPTION_END = ": what this set asks about."
"""How the description the studio's new set starts with ends (`app.bank.edit`)."""


def _written(text: str) -> str:
    """Refuses the studio's starter texts: a set saved with them went live on every learner's
    home page as "New set: what this set asks about." (a newcomer's walk). Until they are
    replaced, the file is left out of the bank, as a draft."""
    if text.strip() == STARTER_EXPLANATION or text.strip().endswith(STARTER_DESCRIPTION_END):
        raise ValueError(
            "still the studio's starter text: write your own (until then the file stays out of the bank)"
        )
    return text


Written = Annotated[NonEmpty, AfterValidator(_written)]
"""Text for learners that the author wrote (not a starter's placeholder)."""


def _source_said(text: str) -> str:
    if not text.strip():
        raise ValueError("say where the question comes from: the document or documentation its answer rests on "
                         "(until then the file stays out of the bank)")  # fmt: skip
    return text


Source = Annotated[str, AfterValidator(_source_said)]
"""Where a question comes from; the studio's starter leaves it empty for its author to say."""
Device = Literal["cpu", "cuda"]
Requires = Literal["cpu", "cuda", "any"]
T = TypeVar("T")


def on_device(by_device: Mapping[Device, T], device: str, otherwise: T) -> T:
    """What a per-device field (`device_answers`, `device_expect`, a choice's `device_outcome`)
    says for `device` (a host's device kind, any string), or `otherwise` where it says nothing."""
    for kind, said in by_device.items():
        if kind == device:
            return said
    return otherwise


class Strict(BaseModel):
    """Unknown fields are errors: a typo like `anwser` must not be silently ignored. Every string
    is text (`NOT_TEXT`): the rule is here, so lint, the loader, the studio and the exports share
    it."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _is_text(cls, value: object) -> object:
        said = first_text_problem(value)
        if said:
            raise ValueError(said)
        return value


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
    warns: str | None = Field(
        None, description="Warning category the run must emit, e.g. FutureWarning."
    )
    warning_message: str | None = Field(
        None, description="Fragment that warning's message must contain."
    )

    @model_validator(mode="after")
    def _says_something(self) -> Expect:
        if not (
            self.raises
            or self.message
            or self.stdout is not None
            or self.stdout_contains
            or self.warns
        ):
            raise ValueError(
                "expect must state at least one of raises, message, stdout, stdout_contains, warns"
            )
        if self.message and not self.raises:
            raise ValueError("expect.message needs expect.raises (the exception type)")
        if self.warning_message and not self.warns:
            raise ValueError("expect.warning_message needs expect.warns (the warning category)")
        # An empty fragment is in every printed text: `stdout_contains: [""]` proved any key.
        if any(not fragment.strip() for fragment in self.stdout_contains) or any(
                said is not None and not said.strip() for said in (self.message, self.warning_message)):  # fmt: skip
            raise ValueError(
                "an empty fragment is found in any run and proves nothing: say what the run shows"
            )
        return self


class Choice(Strict):
    text: NonEmpty = Field(description="Markdown shown as the choice.")
    correct: bool = Field(description="Whether picking this choice is right.")
    why: NonEmpty = Field(description="Feedback shown when a learner picks this choice.")
    outcome: Expect | None = Field(
        None,
        description="What this choice says running the code does (the fields of expect). Required on "
        "every right choice of a question with code; optional on a wrong one. Checked by running: a "
        "right choice's outcome must hold, a wrong choice's must not.",
    )
    device_outcome: dict[Device, Expect] = Field(
        default_factory=dict,
        description="Per-device override of outcome, where the run differs by device "
        "(not for the device the question asks about: that one is `outcome`).",
    )


class QuestionBase(Strict):
    id: Slug = Field(description="Unique across the whole bank; lowercase words joined by '-'.")
    title: str | None = Field(
        None,
        max_length=80,
        description="Short heading for pages and lists; derived from the id when absent.",
    )
    topic: Slug = Field(description="Topic slug, e.g. autocast-basics.")
    difficulty: int = Field(ge=1, le=3, description="1 (warm-up) to 3 (hard).")
    prompt: NonEmpty = Field(description="The question, in Markdown.")
    explanation: Written = Field(description="Why the answer is what it is, in Markdown.")
    source: Source = Field(description="Seed file the question comes from, or a documentation reference.",
                           json_schema_extra={"minLength": 1})  # fmt: skip
    tags: list[Slug] = Field(default_factory=list)
    code: str | None = Field(None, description="Python snippet; runs in the sandbox.")
    requires: Requires = Field("any", description="Where the code can run: cpu, cuda or any.")
    device: Device | None = Field(
        None,
        description="The device the question asks about (its answer is what the code does there). "
        "Default: the one `requires` names, else cpu. Per-device answers for other devices are "
        "shown after answering but never count as right.",
    )
    torch_versions: TorchRange | None = Field(
        None,
        description="The torch releases whose behaviour the key states, as a version range "
        "(`>=2.12`), where a release changed what the code does. A host with another torch never runs "
        "it to prove the key: its record says why it was not run.",
    )

    @model_validator(mode="after")
    def _asks_about_a_device_it_runs_on(self) -> QuestionBase:
        """`requires: cpu` with `device: cuda` (or the other way round) asks what the code does
        where it never runs: no run could prove the key, and it was graded on the author's word."""
        if (
            self.device is not None
            and self.requires in ("cpu", "cuda")
            and self.device != self.requires
        ):
            raise ValueError(f"device: {self.device} asks what the code does on {self.device.upper() if self.device == 'cuda' else 'the CPU'}, "
                             f"but requires: {self.requires} says it runs only there: make them agree (requires: any, if it runs on both)")  # fmt: skip
        return self

    @property
    def asks_about(self) -> Device:
        """The device whose output is this question's answer."""
        return self.device or (self.requires if self.requires != "any" else "cpu")

    def fingerprint(self) -> str:
        """Identity of what a learner answered: prompt, code, choices and key, not the prose
        around them. An attempt keeps it, so a changed or replaced question (even under the
        same id) never inherits another question's history."""
        data = self.model_dump(
            mode="json",
            include={"kind", "prompt", "code", "device", "requires", "choices", "answer", "accept",
                     "device_answers", "tolerance"},
        )  # fmt: skip
        blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


class MultipleChoiceQuestion(QuestionBase):
    kind: Literal["multiple_choice"]
    choices: list[Choice] = Field(min_length=2)
    shuffle: bool = Field(
        True,
        description="Show the choices in an order of each learner's own (stable per learner and "
        'question). Set false where choices refer to each other ("both of the above").',
    )
    expect: Expect | None = Field(
        None,
        description="What the run must show as a whole. Optional where one choice is right: its outcome "
        "is then the expectation. Needed where several are.",
    )
    device_expect: dict[Device, Expect] = Field(
        default_factory=dict,
        description="Per-device override of expect, where output differs by device.",
    )

    @model_validator(mode="after")
    def _checks(self) -> MultipleChoiceQuestion:
        right = [c for c in self.choices if c.correct]
        if not right:
            raise ValueError(
                "a multiple-choice question needs at least one choice with correct: true"
            )
        if not self.code:
            if self.expect is not None:
                raise ValueError("expect without code: there is nothing to run")
            if any(c.outcome is not None or c.device_outcome for c in self.choices):
                raise ValueError("a choice's outcome without code: there is nothing to run")
            return self
        # Which choice is right is what a learner is graded on, so running the code must decide it:
        # a right choice says what the run does, and the run is checked against it.
        for number, choice in enumerate(self.choices, 1):
            if choice.correct and choice.outcome is None:
                raise ValueError(
                    f"choice {number} is marked correct but has no outcome: say what running the code does "
                    "when it is right (outcome: stdout, stdout_contains, raises, warns), so that running it checks the key"
                )
        # An override for the device the question asks about would replace the very outcome that
        # is checked and graded there: a vacuous one ("stdout_contains: torch.") let any key pass.
        for number, choice in enumerate(self.choices, 1):
            if (
                self.asks_about in choice.device_outcome
                and choice.device_outcome[self.asks_about] != choice.outcome
            ):
                raise ValueError(f"choice {number}: device_outcome.{self.asks_about} differs from its outcome, which is what "
                                 f"the run on {self.asks_about} (the device this question asks about) must show: say it once, as outcome")  # fmt: skip
        if (
            self.asks_about in self.device_expect
            and self.device_expect[self.asks_about] != self.expect
        ):
            raise ValueError(f"device_expect.{self.asks_about} differs from expect, which is what the run on "
                             f"{self.asks_about} (the device this question asks about) must show: say it once, as expect")  # fmt: skip
        if self.expect is None:
            if len(right) > 1:
                raise ValueError("with several right choices, expect says what the whole run shows")
            self.expect, self.device_expect = right[0].outcome, dict(right[0].device_outcome)
        return self


NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?!\w)")
"""A printed number: 65504.0, -1e-05, 3.3895313892515355e+38, .5; not the digits inside a name
(`float16`, `layer1`): with a loose tolerance, `float32` counted as `float16`."""


DTYPE_NAME = re.compile(
    r"(?<![\w.])(?:torch\.)?(b?float\d*|half|double|u?int\d*|long|short|bool|complex\d*|cfloat|cdouble)(?!\w)"
)
"""A dtype named in printed text or prose: `torch.float16`, `bfloat16`, `half`."""
SAME_DTYPE = {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32",
              "short": "int16", "cfloat": "complex64", "cdouble": "complex128"}  # fmt: skip
"""Another name of the same dtype."""


class Tolerance(Strict):
    """How close a printed number must be to count as right (either bound suffices)."""

    rel: float = Field(
        0.0, ge=0, le=0.05,
        description="Relative tolerance, e.g. 0.001 for 0.1 %; at most 0.05: a looser one counts the classic "
        "mistakes as right (a loss scale that never backed off is only twice the true one).",
    )  # fmt: skip
    abs: float = Field(0.0, ge=0, description="Absolute tolerance.")

    @model_validator(mode="after")
    def _some(self) -> Tolerance:
        if self.rel == 0 and self.abs == 0:
            raise ValueError("tolerance needs rel or abs above 0")
        return self


class PredictOutputQuestion(QuestionBase):
    kind: Literal["predict_output"]
    code: NonEmpty = Field(description="Python snippet whose printed output the learner predicts.")
    answer: str = Field(description="Exact text the code prints.")
    accept: list[str] = Field(default_factory=list, description="Other acceptable spellings.")
    tolerance: Tolerance | None = Field(
        None,
        description="Accept printed numbers within this tolerance of the answer's (the text "
        "around them must match); for values no one could derive to the last digit.",
    )
    device_answers: dict[Device, str] = Field(
        default_factory=dict,
        description="What the code prints on another device than the one asked about, "
        "where that differs (the device asked about has `answer`).",
    )

    @field_validator("answer")
    @classmethod
    def _says_something(cls, answer: str) -> str:
        """A learner cannot send an empty prediction: code that prints nothing had a key no one
        could type, proved all the same (the studio's starter left it so until its output was used)."""
        if not answer.strip():
            raise ValueError("is empty: run the code and use its output as the answer (the code must print "
                             "what the question asks about; a learner cannot send an empty prediction)")  # fmt: skip
        return answer

    @model_validator(mode="after")
    def _one_answer_for_the_device_asked_about(self) -> PredictOutputQuestion:
        """`answer` is what the code prints on the device the question asks about: another text
        for that device under `device_answers` replaced it in the proof, and a wrong `answer`
        went unchecked and was still graded right."""
        other = self.device_answers.get(self.asks_about)
        if other is not None and other != self.answer:
            raise ValueError(f"device_answers.{self.asks_about} differs from answer, which is what the code prints on "
                             f"{self.asks_about} (the device this question asks about): give it once, as answer")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _tolerance_tells_mistakes_apart(self) -> PredictOutputQuestion:
        """An absolute tolerance must not count zero, half or twice a printed number as right:
        those are the mistakes a question about scales and overflow exists to catch."""
        if self.tolerance is None:
            return self
        rel, absolute = self.tolerance.rel, self.tolerance.abs
        for text in (self.answer, *self.device_answers.values()):
            numbers = NUMBER.findall(text)
            for number in numbers:
                if absolute and float(number) != 0 and absolute >= abs(float(number)) / 2:
                    raise ValueError(
                        f"tolerance: abs {absolute:g} would count 0, half or twice the printed {number} as "
                        f"right; keep it below {abs(float(number)) / 2:g}"
                    )
            # Nor one printed number for another: with "1.0 1.1" and abs 0.11, "1.1 1.1" and
            # "1.0 1.0" (both misconceptions) counted as right.
            for a in numbers:
                for b in numbers:
                    if float(a) != float(b) and math.isclose(
                        float(a), float(b), rel_tol=rel, abs_tol=absolute
                    ):
                        raise ValueError(f"tolerance: it would count the printed {a} as the printed {b}, so an answer that "
                                         "mixes them up would be right; make it tighter than their difference")  # fmt: skip
        return self


Question = Annotated[MultipleChoiceQuestion | PredictOutputQuestion, Field(discriminator="kind")]


class QuestionSet(Strict):
    title: NonEmpty
    description: Written
    questions: list[Question] = Field(min_length=1)


def json_schema() -> dict:
    """JSON Schema of one question-set file, for editors' YAML language servers."""
    schema = QuestionSet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "ampquiz question set"
    return schema
