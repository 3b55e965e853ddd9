"""Instructors and their sign-in links. Instructors are configured by the operator from the
command line (`ampquiz instructor add NAME`), which prints a one-time sign-in link; nobody has a
password, so there is none to store, leak or reset. Learners stay anonymous.

A link works once, within `LINK_TTL`: spending it is one UPDATE that changes the row only while
it is unspent, so of sign-ins racing with one link (two web processes), one gets a session.
Only the link's hash is stored, so a copy of the database lets no one sign in. The spent link's
row is the session it opened, named by an id of its own made at sign-in (kept as a hash too):
signing out deletes it, and removing an instructor deletes all of theirs, so a copied cookie
stops working then. No web framework here: the studio's pages use it, and so does the CLI.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Index, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel, col, delete, select

from app.store import Store, as_utc, utcnow

LINK_TTL = timedelta(hours=1)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


class Instructor(SQLModel, table=True):
    name: str = Field(primary_key=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class SignInLink(SQLModel, table=True):
    __tablename__ = "sign_in_link"
    __table_args__ = (Index("ix_sign_in_link_session_hash", "session_hash", unique=True),)

    token_hash: str = Field(primary_key=True, max_length=64)
    name: str = Field(foreign_key="instructor.name", max_length=64, index=True)
    expires_at: datetime
    used_at: datetime | None = None
    session_hash: str | None = Field(default=None, max_length=64)
    """The hash of the session the spent link opened (the cookie names the session itself)."""


LINKS = SignInLink.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class SignedIn:
    name: str
    session: str
    """The session's own id, for the cookie: a fresh one at every sign-in."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def add(store: Store, name: str) -> bool:
    """Adds an instructor; False when there already is one by that name (added meanwhile too:
    the second INSERT of a name fails on its key)."""
    if not NAME.match(name):
        raise ValueError(
            "a name is letters, digits and . _ @ - (up to 64), starting with a letter or digit"
        )
    with Session(store.engine) as s:
        if s.get(Instructor, name) is not None:
            return False
        s.add(Instructor(name=name))
        try:
            s.commit()
        except IntegrityError:
            return False
        return True


def names(store: Store) -> list[str]:
    with Session(store.engine) as s:
        return sorted(i.name for i in s.exec(select(Instructor)))


def remove(store: Store, name: str) -> bool:
    """Removes an instructor and every link and session of theirs; False when there was none by
    that name (removed meanwhile too: the DELETE that removed the row is the one that says so)."""
    with store.transaction() as conn:
        # Its links first: their foreign key refuses the instructor's row's DELETE before them.
        conn.execute(delete(SignInLink).where(col(SignInLink.name) == name))
        gone = conn.execute(delete(Instructor).where(col(Instructor.name) == name))
    return gone.rowcount == 1


def new_link(store: Store, name: str, now: datetime | None = None) -> str:
    """A fresh one-time sign-in token for an existing instructor (the CLI makes the URL)."""
    now = now or utcnow()
    token = secrets.token_urlsafe(32)
    with Session(store.engine) as s:
        if s.get(Instructor, name) is None:
            raise KeyError(name)
        s.add(SignInLink(token_hash=_hash(token), name=name, expires_at=now + LINK_TTL))
        try:
            s.commit()
        except IntegrityError:  # removed meanwhile: the link's foreign key refused it
            raise KeyError(name) from None
    return token


def sign_in(store: Store, token: str, now: datetime | None = None) -> SignedIn | None:
    """The instructor a link belongs to and the session it opens, once: the link is spent; None
    for a spent, expired or unknown link (or an instructor removed since, whose links went with
    them). Spent by one conditional UPDATE: of sign-ins at the same moment, one has the session."""
    now = now or utcnow()
    token_hash = _hash(token)
    with Session(store.engine) as s:
        link = s.get(SignInLink, token_hash)
        if link is None or link.used_at is not None or as_utc(link.expires_at) < now:
            return None
        name = link.name
    session = secrets.token_urlsafe(32)
    with store.transaction() as conn:
        spent = conn.execute(
            update(LINKS)
            .where(LINKS.c.token_hash == token_hash, LINKS.c.used_at.is_(None))
            .values(used_at=now, session_hash=_hash(session))
        )
    return SignedIn(name, session) if spent.rowcount == 1 else None


def exists(store: Store, name: str) -> bool:
    with Session(store.engine) as s:
        return s.get(Instructor, name) is not None


def in_session(store: Store, name: str, session: str) -> bool:
    """Whether `name` opened `session` by signing in and has neither signed out since nor been
    removed (which deletes their links: a name added again starts with no sessions)."""
    with Session(store.engine) as s:
        link = s.exec(select(SignInLink).where(SignInLink.session_hash == _hash(session))).first()
        return link is not None and link.name == name and link.used_at is not None


def end_session(store: Store, session: str) -> None:
    """Signing out: the session's cookie is refused from now on, wherever a copy of it is."""
    with Session(store.engine) as s:
        s.exec(delete(SignInLink).where(col(SignInLink.session_hash) == _hash(session)))
        s.commit()
