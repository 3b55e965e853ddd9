"""A new set file from the studio: a draft, out of the bank, until its author has written what the
starter leaves to write; its code runs meanwhile, so the answer can be taken from a run (a
newcomer's walk: the starter failed lint, "Run it" refused, the starter's topic counted a question
in another set's topic, and once saved its placeholders went live on every learner's home page)."""

from __future__ import annotations

import json
import re

import pytest

from app import instructors
from app.bank.load import load_text
from tests.support.studio import version
from tests.support.web import Web, as_instructor, studio_session

pytestmark = pytest.mark.anyio


async def test_a_new_set_stays_out_of_the_bank_until_written_and_its_code_runs_meanwhile(
    web: Web,
) -> None:
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        who = as_instructor(await studio_session(c, "ada"))
        made = await c.post(
            "/studio/new-set", data={"name": "walk-set.yaml", "title": "Walk set"}, headers=who
        )
        assert made.status_code == 303 and made.headers["location"] == "/studio/edit/walk-set.yaml"
        text = (web.bank / "walk-set.yaml").read_text()
        assert "topic: walk-set\n" in text  # its own topic, not another set's
        loaded, problems = load_text(text, "walk-set", "walk-set.yaml")
        said = " | ".join(p.message for p in problems)
        assert loaded is None and "description: still the studio's starter text" in said
        assert "[walk-set-first] explanation: still the studio's starter text" in said

        api = {**who, "content-type": "application/json"}
        body = {"name": "walk-set.yaml", "text": text, "question_id": "walk-set-first"}
        run = (await c.post("/studio/api/run", content=json.dumps(body), headers=api)).json()
        assert run["run"]["stdout"] == "torch.bfloat16\n" and run["key"] == "unchecked", run

        # The answer taken from that run is saved with the rest still to write: a draft, out of the bank.
        taken = json.dumps(
            {
                "name": "walk-set.yaml",
                "text": text,
                "question_id": "walk-set-first",
                "output": run["run"]["stdout"],
            }
        )
        text = (await c.post("/studio/api/use-output", content=taken, headers=api)).json()["text"]
        kept = await c.post(
            "/studio/api/save",
            content=json.dumps(
                {
                    "name": "walk-set.yaml",
                    "text": text,
                    "version": version(web.bank / "walk-set.yaml"),
                }
            ),
            headers=api,
        )
        assert kept.status_code == 200 and kept.json()["draft"] is True, kept.text
        assert re.search(r"answer: '?torch\.bfloat16'?\n", (web.bank / "walk-set.yaml").read_text())
        assert "Walk set" not in (await c.get("/")).text  # learners never see a draft
        # A file learners are served is never saved with problems (its questions would go).
        served = (
            (web.bank / "basics.yaml")
            .read_text()
            .replace("description:", "description: ''\nold_description:", 1)
        )
        refused = await c.post(
            "/studio/api/save",
            content=json.dumps(
                {
                    "name": "basics.yaml",
                    "text": served,
                    "version": version(web.bank / "basics.yaml"),
                }
            ),
            headers=api,
        )
        assert (
            refused.status_code == 422
            and "learners are served this file" in refused.json()["error"]
        )

        # Written, it loads: the set goes into the bank as its author made it.
        text = text.replace("Walk set: what this set asks about.", "Autocast dtypes on the CPU.")
        text = text.replace(
            "Why it prints what it prints.", "Linear runs in bfloat16 under CPU autocast."
        )
        text = text.replace("source: ''", "source: docs for autocast")
        taken = json.dumps(
            {
                "name": "walk-set.yaml",
                "text": text,
                "question_id": "walk-set-first",
                "output": "torch.bfloat16\n",
            }
        )
        used = await c.post("/studio/api/use-output", content=taken, headers=api)
        assert used.status_code == 200, used.text
        text = used.json()["text"]
        loaded, problems = load_text(text, "walk-set", "walk-set.yaml")
        assert loaded is not None and problems == [], problems


CUDA_KEY = """\
title: Where it runs
description: A question about what CUDA prints, its code runnable anywhere.
questions:
  - id: where-it-runs
    kind: predict_output
    topic: where-it-runs
    difficulty: 1
    prompt: What does this print on a GPU?
    code: |
      import torch
      print("cuda" if torch.cuda.is_available() else "cpu")
    requires: any
    device: cuda
    answer: cuda
    explanation: It says where it runs.
    source: tests
"""


async def test_a_key_about_cuda_is_not_judged_by_a_cpu_run_in_the_studio(web: Web) -> None:
    """On a CPU server, "Run it" reported a right CUDA key as "printed output differs from the
    answer on cpu" and Save warned it was held back, while the live server grades it (an
    instructor's walk): a run here says nothing of it, and the studio says so."""
    async with web.client() as c:
        instructors.add(c.app.state.web.store, "ada")  # type: ignore[attr-defined]
        api = {**as_instructor(await studio_session(c, "ada")), "content-type": "application/json"}
        body = {"name": "where-it-runs.yaml", "text": CUDA_KEY, "question_id": "where-it-runs"}
        run = (await c.post("/studio/api/run", content=json.dumps(body), headers=api)).json()
        assert run["run"]["stdout"] == "cpu\n" and run["key"] == "skip", run
        assert run["reason"].startswith(
            "not checked on this server: its key is what the code does on CUDA"
        ), run
        saved = await c.post(
            "/studio/api/save",
            content=json.dumps({"name": "where-it-runs.yaml", "text": CUDA_KEY, "version": ""}),
            headers=api,
        )
        assert saved.status_code == 200 and saved.json()["warnings"] == [], saved.text
