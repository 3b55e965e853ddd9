"""The question bank: its YAML format (`schema`) and loading it with `file:line:col` problems (`load`).

Pure Python, no web framework: the CLI, the verifier and the web app all read the bank through
`load_bank`. To add a question field, add it to `app.bank.schema` (the one definition); the
loader, `ampquiz schema` and `ampquiz export` follow from it.
"""

from app.bank.load import (
    AnyQuestion,
    Bank,
    LoadedQuestion,
    LoadedSet,
    Problem,
    load_bank,
    question_files,
)
from app.bank.schema import MultipleChoiceQuestion, PredictOutputQuestion, QuestionSet

__all__ = [
    "AnyQuestion",
    "Bank",
    "LoadedQuestion",
    "LoadedSet",
    "MultipleChoiceQuestion",
    "PredictOutputQuestion",
    "Problem",
    "QuestionSet",
    "load_bank",
    "question_files",
]
