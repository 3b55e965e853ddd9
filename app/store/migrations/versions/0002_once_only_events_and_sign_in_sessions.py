"""Once-only events and sign-in sessions: each interview event's number in its interview and
its once-only key, and each sign-in's own session.

`interview_event.seq` numbers an interview's events 1, 2, ... (unique per interview: the live
stream's ids, given in commit order); the events already stored are numbered in the order they
were stored. `interview_event.once` is the key of what may happen once in an interview (unique
per interview; None for the rest and for every event already stored).
`sign_in_link.session_hash` is the hash of the session a sign-in opened: a session used to be
named by its link's hash, so a link already spent gets the hash of that name, and whoever is
signed in stays signed in.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None

NUMBERED = (
    "UPDATE interview_event SET seq = (SELECT count(*) FROM interview_event AS earlier"
    " WHERE earlier.interview_id = interview_event.interview_id AND earlier.id <= interview_event.id)"
)
"""Every stored event numbered in its interview, in the order of the ids they were stored under."""


def upgrade() -> None:
    with op.batch_alter_table("interview_event") as batch:
        batch.add_column(sa.Column("seq", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("once", sa.String(length=40), nullable=True))
    op.execute(NUMBERED)
    with op.batch_alter_table("interview_event") as batch:
        batch.alter_column("seq", existing_type=sa.Integer(), nullable=False)
        batch.create_index("ix_interview_event_seq", ["interview_id", "seq"], unique=True)
        batch.create_index("ix_interview_event_once", ["interview_id", "once"], unique=True)

    with op.batch_alter_table("sign_in_link") as batch:
        batch.add_column(sa.Column("session_hash", sa.String(length=64), nullable=True))
        batch.create_index("ix_sign_in_link_session_hash", ["session_hash"], unique=True)
    links = sa.table(
        "sign_in_link",
        sa.column("token_hash", sa.String()),
        sa.column("used_at", sa.DateTime(timezone=True)),
        sa.column("session_hash", sa.String()),
    )
    conn = op.get_bind()
    spent = conn.execute(sa.select(links.c.token_hash).where(links.c.used_at.is_not(None)))
    for (token_hash,) in spent.all():  # the session's old name was the link's hash
        session_hash = hashlib.sha256(token_hash.encode()).hexdigest()
        conn.execute(
            links.update().where(links.c.token_hash == token_hash).values(session_hash=session_hash)
        )


def downgrade() -> None:
    with op.batch_alter_table("sign_in_link") as batch:
        batch.drop_index("ix_sign_in_link_session_hash")
        batch.drop_column("session_hash")
    with op.batch_alter_table("interview_event") as batch:
        batch.drop_index("ix_interview_event_once")
        batch.drop_index("ix_interview_event_seq")
        batch.drop_column("once")
        batch.drop_column("seq")
