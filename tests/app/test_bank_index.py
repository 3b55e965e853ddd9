"""The bank index's learning path: the order the home page lists the sets in."""

from __future__ import annotations

from app.bank import load_bank
from app.bank.index import index_of
from tests.support.cli import REPO


def test_the_sets_come_starter_first_then_easiest_first() -> None:
    """In the bank's (file name) order an advanced set, "Activation checkpointing", came first and
    the starter third (a newcomer's walk on a phone, scrolling 16 screens of sets)."""
    bank = load_bank(REPO / "questions")
    index = index_of(bank)
    path = list(index.path)
    assert sorted(s.id for s in path) == sorted(s.id for s in bank.sets)
    assert path[0] is index.starter
    means = [sum(q.question.difficulty for q in s.questions) / len(s.questions) for s in path[1:]]
    assert means == sorted(means)
    assert (
        path[0].id != "activation-checkpointing" and bank.sets[0].id == "activation-checkpointing"
    )
