"""Instructors and their sign-in links. Instructors are configured by the operator from the
command line (`ampquiz instructor add NAME`), which prints a one-time sign-in link; nobody has a
password, so there is none to store, leak or reset. Learners stay anonymous.

A link works once, within `LINK_TTL`; only its hash is stored, so a copy of the database lets
no one sign in. The spent link's row is the session it opened: signing out deletes it, and removing
an instructor deletes all of theirs, so a copied cookie stops working then. No web framework here: the studio's pages use it, and so does the CLI.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime, timedelta

from sqlmodel import Field, Session, SQLModel, col, delete, select

from app.store import Store, as_utc, utcnow

LINK_TTL = timedelta(hours=1)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


class Instructor(SQLModel, table=True):
    name: str = Field(primary_key=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class SignInLink(SQLModel, table=True):
    __tablename__ = "sign_in_link"

    token_hash: str = Field(primary_key=True, max_length=64)
    name: str = Field(foreign_key="instructor.name", max_length=64, index=True)
    expires_at: datetime
    used_at: datetime | None = None


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def ensure_tables(store: Store) -> None:
    # SQLModel gives a table model its __table__ as it makes the class; its types leave it out.
    store.make_tables(Instructor.__table__, SignInLink.__table__)  # type: ignore[attr-defined]


def add(store: Store, name: str) -> bool:
    """Adds an instructor; False when there already is one by that name."""
    if not NAME.match(name):
        raise ValueError(
            "a name is letters, digits and . _ @ - (up to 64), starting with a letter or digit"
        )
    ensure_tables(store)
    with Session(store.engine) as s:
        if s.get(Instructor, name) is not None:
            return False
        s.add(Instructor(name=name))
        s.commit()
        return True


def names(store: Store) -> list[str]:
    ensure_tables(store)
    with Session(store.engine) as s:
        return sorted(i.name for i in s.exec(select(Instructor)))


def remove(store: Store, name: str) -> bool:
    ensure_tables(store)
    with Session(store.engine) as s:
        found = s.get(Instructor, name)
        if found is None:
            return False
        # Its links first, flushed: left to the session, the instructor's row could be deleted
        # before them (their foreign key then refused it, and no one could be removed).
        s.exec(delete(SignInLink).where(col(SignInLink.name) == name))
        s.flush()
        s.delete(found)
        s.commit()
        return True


def new_link(store: Store, name: str, now: datetime | None = None) -> str:
    """A fresh one-time sign-in token for an existing instructor (the CLI makes the URL)."""
    ensure_tables(store)
    now = now or utcnow()
    token = secrets.token_urlsafe(32)
    with Session(store.engine) as s:
        if s.get(Instructor, name) is None:
            raise KeyError(name)
        s.add(SignInLink(token_hash=_hash(token), name=name, expires_at=now + LINK_TTL))
        s.commit()
    return token


def sign_in(store: Store, token: str, now: datetime | None = None) -> str | None:
    """The instructor a link belongs to, once: the link is spent; None for a spent, expired or
    unknown link (or an instructor removed since)."""
    ensure_tables(store)
    now = now or utcnow()
    with Session(store.engine) as s:
        link = s.get(SignInLink, _hash(token))
        if link is None or link.used_at is not None or as_utc(link.expires_at) < now:
            return None
        if s.get(Instructor, link.name) is None:
            return None
        link.used_at = now
        s.add(link)
        s.commit()
        return link.name


def exists(store: Store, name: str) -> bool:
    ensure_tables(store)
    with Session(store.engine) as s:
        return s.get(Instructor, name) is not None


def session_of(token: str) -> str:
    """The session a spent link opened: its stored hash (the cookie names it, signed)."""
    return _hash(token)


def in_session(store: Store, name: str, session: str) -> bool:
    """Whether `name` signed in with the link `session` names and has neither signed out since
    nor been removed (which deletes their links: a name added again starts with no sessions)."""
    ensure_tables(store)
    with Session(store.engine) as s:
        link = s.get(SignInLink, session)
        return link is not None and link.name == name and link.used_at is not None


def end_session(store: Store, session: str) -> None:
    """Signing out: the session's cookie is refused from now on, wherever a copy of it is."""
    ensure_tables(store)
    with Session(store.engine) as s:
        s.exec(delete(SignInLink).where(col(SignInLink.token_hash) == session))
        s.commit()
