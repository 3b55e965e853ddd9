"""Persistence: the tables (`tables`), the database under them (`database`: engines, SQLite's
writers taking turns, reconnecting), the statements (`sql`, `driver_statements`), the rows handed
out (`rows`), each learner's kept summary (`learner_summaries`), and `Store`, which the rest of the
app calls (`repository`). Schema changes are Alembic migrations (`migrations/`).
"""

from app.store.repository import Store
from app.store.rows import AttemptRow, CardRow, LearnerData, QuestionState, ReviewUpdate
from app.store.tables import (
    Attempt,
    LastAnswer,
    Learner,
    QuestionRun,
    ReviewCard,
    TopicScore,
    as_utc,
    utcnow,
)

__all__ = [
    "Attempt", "AttemptRow", "CardRow", "LastAnswer", "Learner", "LearnerData", "QuestionRun", "QuestionState",
    "ReviewCard", "ReviewUpdate", "Store", "TopicScore", "as_utc", "utcnow",
]  # fmt: skip
