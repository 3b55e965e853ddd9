"""The web tests' support: a small question bank, a movable clock, and the real app on a real
temporary SQLite file, talked to through httpx's ASGI transport.

Every app the tests build shares the session's sandbox pool (it takes seconds to start; the apps
take milliseconds): pass it as `Web(tmp_path, pool)`.
"""

from __future__ import annotations

import asyncio
import html
import re
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml
from fastapi import FastAPI

from app import instructors
from app.bank.load import load_bank
from app.settings import Settings
from app.store import Store
from app.verify.record import Record, question_hash, record_name
from app.web.factory import create_app
from app.web.routes.studio.auth import COOKIE as STUDIO_COOKIE
from sandbox import Sandbox

BANK = {
    "basics.yaml": """\
title: Basics for tests
description: A *small* set used by the web tests.
questions:
  - id: po-linear-dtype
    kind: predict_output
    topic: autocast-basics
    difficulty: 1
    prompt: |
      What does this print? <script>alert("xss")</script>
    code: |
      import torch
      layer = torch.nn.Linear(4, 2)
      with torch.autocast("cpu"):
          y = layer(torch.ones(1, 4))
      print(y.dtype, y.shape)
    requires: cpu
    answer: torch.bfloat16 torch.Size([1, 2])
    accept: ["torch.bfloat16  torch.Size([1, 2])"]
    explanation: |
      EXPLANATION-PO: `linear` is on autocast's lower-precision list.
    source: tests
  - id: mc-half-dtype
    kind: multiple_choice
    topic: dtypes
    difficulty: 2
    prompt: Which dtype does this print?
    code: |
      import torch
      print(torch.ones(2).half().dtype)
    requires: cpu
    choices:
      - text: "`torch.float32`"
        correct: false
        why: WHY-A-WRONG half() converts to float16.
      - text: "`torch.float16`"
        correct: true
        why: WHY-B-RIGHT half means float16.
        outcome:
          stdout: torch.float16
      - text: "`torch.bfloat16`"
        correct: false
        why: WHY-C-WRONG bfloat16 is another format.
    explanation: EXPLANATION-MC half is float16.
    source: tests
  - id: mc-sixteen-bit
    kind: multiple_choice
    topic: dtypes
    difficulty: 1
    prompt: Which are 16-bit floating-point types?
    choices:
      - {text: float16, correct: true, why: WHY-M0 yes}
      - {text: bfloat16, correct: true, why: WHY-M1 yes}
      - {text: float32, correct: false, why: WHY-M2 no}
    explanation: EXPLANATION-MULTI
    source: tests
  - id: po-needs-cuda
    kind: predict_output
    topic: autocast-basics
    difficulty: 2
    prompt: What does this print on a GPU?
    code: |
      import torch
      with torch.autocast("cuda"):
          y = torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
      print(y.dtype)
    requires: cuda
    answer: torch.float16
    explanation: EXPLANATION-CUDA
    source: tests
""",
    "broken.yaml": """\
title: A file mid-edit
description: Has a problem, so it is left out while the rest loads.
questions:
  - id: broken-one
    kind: predict_output
""",
}

SECRETS = ("EXPLANATION-", "WHY-", "torch.Size([1, 2])")
"""Text of the test bank's keys, feedback and explanations: no page may show it before an attempt."""
KEY_FIELDS = ('"correct"', '"why"', '"answer"', '"accept"', '"explanation"', '"expect"')
"""JSON keys that would carry an answer key."""


REPO = Path(__file__).resolve().parents[2]
_CHOICE_TEXTS: dict[str, list[str]] = {}


def _choice_texts(question_id: str) -> list[str]:
    """The choices' texts of a question of the test bank, else of the repository's or the browser
    tests' bank, in the YAML's order."""
    if not _CHOICE_TEXTS:
        for text in BANK.values():
            for q in (yaml.safe_load(text) or {}).get("questions") or []:
                if isinstance(q, dict) and "choices" in q:
                    _CHOICE_TEXTS[q["id"]] = [c["text"] for c in q["choices"]]
    for folder in ("questions", "tests/browser/bank"):
        if question_id in _CHOICE_TEXTS:
            break
        for loaded in load_bank(REPO / folder).questions:
            choices = getattr(loaded.question, "choices", None)
            if choices:
                _CHOICE_TEXTS.setdefault(loaded.id, [c.text for c in choices])
    return _CHOICE_TEXTS[question_id]


def positions(shown: list[dict[str, Any]], question_id: str, *identities: int) -> list[int]:
    """Where the choices `identities` (their places in the YAML) are in `shown`, a question's
    `choices` as its API gives them to one learner."""
    texts = _choice_texts(question_id)
    return [next(c["index"] for c in shown if c["text"] == texts[i]) for i in identities]


async def shown_at(client: httpx.AsyncClient, question_id: str, *identities: int) -> list[int]:
    """The positions an answer sends for the choices `identities` (places in the YAML) of a
    question, in the order this client's learner sees them: what the page's form and the API
    take (the YAML's places would say where the bank wrote the right choice)."""
    shown = (await client.get(f"/api/questions/{question_id}")).json()["choices"]
    return positions(shown, question_id, *identities)


async def form_at(client: httpx.AsyncClient, question_id: str, *identities: int) -> list[str]:
    """`shown_at`, as a form's `choice` fields."""
    return [str(p) for p in await shown_at(client, question_id, *identities)]


def form_in_page(page: str, question_id: str, *identities: int) -> list[str]:
    """The `choice` fields that pick the choices `identities` (places in the YAML) on a page's
    answer form (an interview's, say): each input's value is its position, its text beside it."""
    inputs = re.findall(
        r'name="choice" value="(\d+)">\s*<span class="letter">[^<]*</span>\s*<span class="text">(.*?)</span>',
        page,
        re.DOTALL,
    )
    plain = {re.sub(r"<[^>]+>", "", html.unescape(text)).strip(): value for value, text in inputs}
    texts = _choice_texts(question_id)
    return [plain[texts[i].replace("`", "").strip()] for i in identities]


async def studio_session(client: httpx.AsyncClient, name: str) -> str:
    """Signs instructor `name` in with a fresh one-time link; returns the studio cookie's value,
    with the client's jar cleared (a request then says which session it is: `as_instructor`)."""
    store = client.app.state.web.store  # type: ignore[attr-defined]
    signed = await client.post(f"/studio/sign-in/{instructors.new_link(store, name)}")
    assert signed.status_code == 303, signed.text
    client.cookies.clear()
    return signed.cookies[STUDIO_COOKIE]


def as_instructor(cookie: str) -> dict[str, str]:
    """The header that sends a studio session's cookie, alone."""
    return {"cookie": f"{STUDIO_COOKIE}={cookie}"}


def write_bank(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in BANK.items():
        (folder / name).write_text(text)
    return folder


def commit_record(bank: Path, environment: dict[str, Any], ids: list[str]) -> None:
    """A committed verification record saying these questions' keys passed in `environment`, as
    `ampquiz verify --record` writes it (for tests whose server cannot run code to prove them)."""
    loaded = load_bank(bank)
    results = {}
    for qid in ids:
        found = loaded.question(qid)
        assert found is not None, qid
        results[qid] = {"result": "pass", "hash": question_hash(found.question)}
    env = {k: environment.get(k) for k in ("torch_version", "device_kind", "device_name")}
    env["date"] = "2026-11-01T00:00:00+00:00"
    folder = bank / "verified"
    folder.mkdir(exist_ok=True)
    (folder / record_name(env)).write_text(Record(folder, env, results).to_json())


async def wait_for_proofs(app: FastAPI, timeout_s: float = 60) -> None:
    """Until no question of the served bank is pending proof."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while app.state.web.proof_summary()["counts"]["pending"]:
        assert asyncio.get_running_loop().time() < deadline, (
            "the server did not prove its bank in time"
        )
        await asyncio.sleep(0.02)


@dataclass
class Clock:
    """The only thing the web tests fake: time, to see reviews come due."""

    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


_EMPTY_DATABASE: dict[str, bytes] = {}


def empty_database() -> bytes:
    """A new SQLite database as the store makes it (the schema at its head, no rows), made once a
    run: making one runs the migrations (a fifth of a second), and every app a test built made its
    own. The migrations' own tests, and every server, still make theirs from nothing."""
    if "made" not in _EMPTY_DATABASE:
        with tempfile.TemporaryDirectory() as folder:
            Store(f"sqlite:///{folder}/empty.db").close()  # its last connection gone: no WAL left
            _EMPTY_DATABASE["made"] = (Path(folder) / "empty.db").read_bytes()
    return _EMPTY_DATABASE["made"]


@dataclass
class Web:
    """Builds the real app on `tmp/ampquiz.db` with the test bank; `client()` runs its lifespan."""

    tmp: Path
    pool: Sandbox
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        self.bank = write_bank(self.tmp / "bank")
        self.db = self.tmp / "data" / "ampquiz.db"

    def settings(self, **overrides: Any) -> Settings:
        values: dict[str, Any] = {"database_url": f"sqlite:///{self.db}", "bank": self.bank}
        values.update(overrides)
        return Settings(**values)

    def app(self, **overrides: Any) -> FastAPI:
        if "database_url" not in overrides and not self.db.exists():
            self.db.parent.mkdir(parents=True, exist_ok=True)
            self.db.write_bytes(empty_database())
        return create_app(self.settings(**overrides), sandbox=self.pool, clock=self.clock)

    @asynccontextmanager
    async def client(
        self, cookies: httpx.Cookies | None = None, *, proved: bool = True, **overrides: Any
    ) -> AsyncIterator[httpx.AsyncClient]:
        """The real app through httpx's ASGI transport, its lifespan run around the client.
        With `proved`, it first waits until the server has proved every key it can (the bank
        here has no committed record, so each code question is pending at start)."""
        app = self.app(**overrides)
        async with app.router.lifespan_context(app):
            if proved:
                await wait_for_proofs(app)
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://testserver", cookies=cookies
            ) as client:
                client.app = app  # type: ignore[attr-defined]
                yield client


async def assert_answered_while_held(
    client: httpx.AsyncClient, owner: Any, name: str, slow_url: str
) -> None:
    """Holds `owner.name` (a blocking database read) for up to 3 s while `slow_url` is fetched,
    and asserts that /healthz was answered meanwhile: the read runs off the event loop. On the
    loop, the hold would stop every request, /healthz's too, until it ended."""
    read, release, finished = getattr(owner, name), threading.Event(), {}

    def held(*args: Any, **kwargs: Any) -> Any:
        release.wait(timeout=3)
        finished["read"] = time.monotonic()
        return read(*args, **kwargs)

    setattr(owner, name, held)
    try:
        waiting = asyncio.ensure_future(client.get(slow_url))
        await asyncio.sleep(0.1)
        other = await client.get("/healthz")
        finished["other"] = time.monotonic()
        release.set()
        assert (await waiting).status_code == 200 and other.status_code == 200
        assert finished["other"] < finished["read"], "the read held the event loop"
    finally:
        setattr(owner, name, read)
