"""The first schema: every table and index as ampquiz made them before it had migrations.

A database made then (by `create_all`, with no `alembic_version`) is recognised as this revision
and stamped (`app.store.migrate`), so this file is also the description of that schema: keep it
as it is; later changes are later revisions.

Revision ID: 0001
Revises:
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True)
"""Every moment is stored with its time zone where the database keeps one (UTC throughout)."""


def tables(table: Callable[..., Any]) -> None:
    """Every table of this revision, each made by `table(name, *columns_and_indexes)`: alembic's
    `op.create_table` to upgrade, a `Table` on a `MetaData` to bring a database made before
    migrations up to this revision (`app.store.migrate`)."""
    S = sa.String  # short: the columns below read best a line each
    table("learner",
          sa.Column("id", S(64), nullable=False, primary_key=True),
          sa.Column("created_at", TIME, nullable=False))  # fmt: skip
    table("attempt",
          sa.Column("id", sa.Integer(), nullable=False, primary_key=True),
          sa.Column("learner_id", S(64), sa.ForeignKey("learner.id"), nullable=False),
          sa.Column("question_id", S(80), nullable=False),
          sa.Column("set_id", S(120), nullable=False),
          sa.Column("topic", S(80), nullable=False),
          sa.Column("kind", S(20), nullable=False),
          sa.Column("answer", S(), nullable=False),
          sa.Column("correct", sa.Boolean(), nullable=False),
          sa.Column("created_at", TIME, nullable=False),
          sa.Column("fingerprint", S(16), nullable=False),
          sa.Column("submit_id", S(64), nullable=True),
          sa.Column("seconds", sa.Float(), nullable=True),
          sa.Index("ix_attempt_created_at", "created_at"),
          sa.Index("ix_attempt_learner_id", "learner_id"),
          sa.Index("ix_attempt_question_id", "question_id"),
          sa.Index("ix_attempt_learner_question", "learner_id", "question_id", "id"),
          sa.Index("ix_attempt_learner_submit", "learner_id", "submit_id", unique=True))  # fmt: skip
    table("review_card",
          sa.Column("learner_id", S(64), sa.ForeignKey("learner.id"), nullable=False, primary_key=True),
          sa.Column("question_id", S(80), nullable=False, primary_key=True),
          sa.Column("card", S(), nullable=False),
          sa.Column("due", TIME, nullable=False),
          sa.Column("lapses", sa.Integer(), nullable=False),
          sa.Column("fingerprint", S(16), nullable=False),
          sa.Index("ix_review_card_due", "due"))  # fmt: skip
    table("last_answer",
          sa.Column("learner_id", S(64), nullable=False, primary_key=True),
          sa.Column("question_id", S(80), nullable=False, primary_key=True),
          sa.Column("fingerprint", S(16), nullable=False, primary_key=True),
          sa.Column("attempt_id", sa.Integer(), nullable=False),
          sa.Column("correct", sa.Boolean(), nullable=False))  # fmt: skip
    table("topic_score",
          sa.Column("learner_id", S(64), nullable=False, primary_key=True),
          sa.Column("topic", S(80), nullable=False, primary_key=True),
          sa.Column("attempts", sa.Integer(), nullable=False),
          sa.Column("right_attempts", sa.Integer(), nullable=False))  # fmt: skip
    table("question_run",
          sa.Column("key", S(64), nullable=False, primary_key=True),
          sa.Column("result", S(), nullable=False),
          sa.Column("created_at", TIME, nullable=False))  # fmt: skip
    table("interview",
          sa.Column("id", sa.Integer(), nullable=False, primary_key=True),
          sa.Column("candidate_token", S(64), nullable=False),
          sa.Column("host_hash", S(64), nullable=False),
          sa.Column("created_by", S(64), nullable=False),
          sa.Column("questions", S(), nullable=False),
          sa.Column("minutes", sa.Integer(), nullable=True),
          sa.Column("created_at", TIME, nullable=False),
          sa.Column("revoked_at", TIME, nullable=True),
          sa.Index("ix_interview_candidate_token", "candidate_token", unique=True),
          sa.Index("ix_interview_host_hash", "host_hash", unique=True))  # fmt: skip
    table("interview_event",
          sa.Column("id", sa.Integer(), nullable=False, primary_key=True),
          sa.Column("interview_id", sa.Integer(), sa.ForeignKey("interview.id"), nullable=False),
          sa.Column("kind", S(20), nullable=False),
          sa.Column("data", S(), nullable=False),
          sa.Column("at", TIME, nullable=False),
          sa.Index("ix_interview_event_interview_id", "interview_id"))  # fmt: skip
    table("instructor",
          sa.Column("name", S(64), nullable=False, primary_key=True),
          sa.Column("created_at", TIME, nullable=False))  # fmt: skip
    table("sign_in_link",
          sa.Column("token_hash", S(64), nullable=False, primary_key=True),
          sa.Column("name", S(64), sa.ForeignKey("instructor.name"), nullable=False),
          sa.Column("expires_at", TIME, nullable=False),
          sa.Column("used_at", TIME, nullable=True),
          sa.Index("ix_sign_in_link_name", "name"))  # fmt: skip


def upgrade() -> None:
    tables(op.create_table)


def downgrade() -> None:
    made: list[str] = []
    tables(lambda name, *_: made.append(name))
    for name in reversed(made):  # those that others' foreign keys name go last
        op.drop_table(name)
