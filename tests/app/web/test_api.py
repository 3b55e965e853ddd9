"""The JSON API through the real app, on a real temporary SQLite file and the real sandbox."""

from __future__ import annotations

import pytest

from tests.support.web import KEY_FIELDS, SECRETS, Web, assert_answered_while_held, shown_at

pytestmark = pytest.mark.anyio


async def test_lists_sets_and_questions_with_counts(web: Web) -> None:
    async with web.client() as c:
        sets = (await c.get("/api/sets")).json()
        assert [s["id"] for s in sets] == ["basics"]  # broken.yaml is left out, the rest serves
        assert sets[0]["progress"]["total"] == 4 and sets[0]["progress"]["new"] == 4
        questions = (await c.get("/api/questions", params={"topic": "dtypes"})).json()
        assert [q["id"] for q in questions] == ["mc-half-dtype", "mc-sixteen-bit"]
        shown = questions[0]["choices"]  # in this learner's order, each with its position there
        assert sorted(c["text"] for c in shown) == [
            "`torch.bfloat16`",
            "`torch.float16`",
            "`torch.float32`",
        ]
        assert [c["index"] for c in shown] == [0, 1, 2]
        assert questions[0]["multiple"] is False and questions[1]["multiple"] is True
        health = (await c.get("/healthz")).json()
        assert health["ok"] is True and health["questions"] == 4 and health["bank_problems"] > 0


async def test_questions_never_leak_answers_before_an_attempt(web: Web) -> None:
    async with web.client() as c:
        api = ["/api/sets", "/api/sets/basics", "/api/questions", "/api/questions/po-linear-dtype",
               "/api/questions/mc-half-dtype", "/api/progress"]  # fmt: skip
        pages = [
            "/",
            "/sets/basics",
            "/questions/po-linear-dtype",
            "/questions/mc-half-dtype",
            "/progress",
        ]
        for url in api + pages:
            body = (await c.get(url)).text
            for secret in SECRETS + (KEY_FIELDS if url in api else ()):
                assert secret not in body, (url, secret)


async def test_predict_output_wrong_then_right(web: Web) -> None:
    async with web.client() as c:
        wrong = await c.post(
            "/api/questions/po-linear-dtype/attempts", json={"output": "torch.float32"}
        )
        assert wrong.status_code == 200
        body = wrong.json()
        assert body["ok"] is True and body["correct"] is False and body["status"] == "wrong"
        assert body["outcome"]["expected_output"] == "torch.bfloat16 torch.Size([1, 2])"
        assert body["outcome"]["explanation"].startswith("EXPLANATION-PO")
        # the run of the question's code, explained: the real sandbox proves the key
        assert body["run"]["status"] == "ok"
        assert body["run"]["stdout"] == "torch.bfloat16 torch.Size([1, 2])\n"
        ops = body["run"]["explanation"]["ops"]
        assert any("linear" in op["name"] and op["output"]["dtype"] == "bfloat16" for op in ops)
        assert [v["device"] for v in body["verification"]] == ["cpu", "cuda"]

        right = await c.post(
            "/api/questions/po-linear-dtype/attempts",
            params={"run": "false"},
            json={
                "output": "torch.bfloat16 torch.Size([1, 2])  \n\n"
            },  # trailing whitespace is forgiven
        )
        assert right.json()["correct"] is True and right.json()["run"] is None
        accepted = await c.post(
            "/api/questions/po-linear-dtype/attempts", params={"run": "false"},
            json={"output": "torch.bfloat16  torch.Size([1, 2])"},
        )  # fmt: skip
        assert accepted.json()["correct"] is True


async def test_multiple_choice_wrong_then_right_with_feedback(web: Web) -> None:
    async with web.client() as c:
        wrong = (
            await c.post(
                "/api/questions/mc-half-dtype/attempts?run=false",
                json={"choices": await shown_at(c, "mc-half-dtype", 2)},
            )
        ).json()
        assert wrong["correct"] is False
        assert wrong["outcome"]["correct_choices"] == await shown_at(c, "mc-half-dtype", 1)
        picked = [ch for ch in wrong["outcome"]["choices"] if ch["picked"]]
        assert [ch["why"] for ch in picked] == ["WHY-C-WRONG bfloat16 is another format."]
        right = (
            await c.post(
                "/api/questions/mc-half-dtype/attempts?run=false",
                json={"choices": await shown_at(c, "mc-half-dtype", 1)},
            )
        ).json()
        assert right["correct"] is True

        # several right answers: all of them, and nothing else
        some = (
            await c.post(
                "/api/questions/mc-sixteen-bit/attempts",
                json={"choices": await shown_at(c, "mc-sixteen-bit", 0)},
            )
        ).json()
        assert some["correct"] is False and some["run"] is None  # no code, no run
        both = (
            await c.post(
                "/api/questions/mc-sixteen-bit/attempts",
                json={"choices": await shown_at(c, "mc-sixteen-bit", 1, 0)},
            )
        ).json()
        assert both["correct"] is True


async def test_an_answer_that_does_not_fit_is_refused(web: Web) -> None:
    async with web.client() as c:
        r = await c.post("/api/questions/mc-half-dtype/attempts", json={"choices": [7]})
        assert r.status_code == 400
        assert r.json() == {
            "ok": False,
            "error": "Choice 7 does not exist (this question has 3).",
            "status": 400,
        }
        r = await c.post("/api/questions/mc-half-dtype/attempts", json={"output": "x"})
        assert r.status_code == 400 and "picked choices" in r.json()["error"]
        progress = (await c.get("/api/progress")).json()
        assert progress["totals"]["attempts"] == 0  # refused answers are not recorded


async def test_cuda_question_says_it_needs_a_gpu_instead_of_running(web: Web) -> None:
    async with web.client() as c:
        body = (
            await c.post("/api/questions/po-needs-cuda/attempts", json={"output": "torch.float16"})
        ).json()
        assert body["correct"] is True
        assert body["run"]["status"] == "unavailable"
        assert (
            body["run"]["message"] == "This question's code needs a CUDA GPU; this server has none."
        )


async def test_run_code_with_and_without_explanation(web: Web) -> None:
    async with web.client() as c:
        plain = (await c.post("/api/run", json={"code": "print(6 * 7)"})).json()
        assert (
            plain["ok"] is True
            and plain["run"]["status"] == "ok"
            and plain["run"]["stdout"] == "42\n"
        )
        assert plain["run"]["explanation"] is None
        code = "import torch\nx = torch.ones(2, dtype=torch.float16)\nprint((x * 70000).tolist())\n"
        explained = (await c.post("/api/run", json={"code": code, "explain": True})).json()["run"]
        assert explained["stdout"] == "[inf, inf]\n"
        assert explained["explanation"]["ops"], explained["explanation"]
        failing = (await c.post("/api/run", json={"code": "raise ValueError('nope')"})).json()[
            "run"
        ]
        assert failing["status"] == "error" and failing["exception"]["type"] == "ValueError"


async def test_progress_survives_a_restart(web: Web) -> None:
    async with web.client() as c:
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 0)},
        )
        await c.post(
            "/api/questions/po-linear-dtype/attempts?run=false",
            json={"output": "torch.bfloat16 torch.Size([1, 2])"},
        )
        cookies = c.cookies
        assert "ampquiz_learner" in cookies
    assert web.db.exists() and (web.db.parent / "secret_key").exists()

    async with web.client(cookies=cookies) as c:  # a new app: same database file, same key file
        progress = (await c.get("/api/progress")).json()
        assert progress["totals"] == {
            "attempts": 2,
            "right": 1,
            "answered": 2,
            "questions": 4,
            "due": 0,
        }
        assert [h["question_id"] for h in progress["history"]] == [
            "po-linear-dtype",
            "mc-half-dtype",
        ]
        assert [r["question_id"] for r in progress["review"]] == ["mc-half-dtype"]
        by_topic = {t["topic"]: t for t in progress["topics"]}
        assert by_topic["dtypes"]["attempts"] == 1 and by_topic["dtypes"]["accuracy"] == 0
        assert by_topic["autocast-basics"]["accuracy"] == 100

    async with web.client() as stranger:  # another browser sees nothing of it
        assert (await stranger.get("/api/progress")).json()["totals"]["attempts"] == 0


async def test_a_forged_cookie_is_a_new_learner(web: Web) -> None:
    async with web.client() as c:
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 1)},
        )
        learner = c.cookies["ampquiz_learner"]
    forged = learner[:-2] + ("AA" if not learner.endswith("AA") else "BB")
    async with web.client() as c:
        c.cookies.set("ampquiz_learner", forged)
        r = await c.get("/api/progress")
        assert r.json()["totals"]["attempts"] == 0
        assert "ampquiz_learner=" in r.headers["set-cookie"]


async def test_missed_questions_come_back_for_review(web: Web) -> None:
    async with web.client() as c:
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 0)},
        )
        assert (await c.get("/api/questions/mc-half-dtype")).json()["status"] == "wrong"
        # right again at once, the key just shown: practice, not recorded, so it stays to revisit
        again = await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 1)},
        )
        assert again.json()["correct"] is True and again.json()["recorded"] is False
        assert (await c.get("/api/questions/mc-half-dtype")).json()["status"] == "wrong"
        web.clock.advance(minutes=30)
        assert (await c.get("/api/questions/mc-half-dtype")).json()["status"] == "due"
        review = (await c.get("/api/progress")).json()["review"]
        assert review[0]["question_id"] == "mc-half-dtype" and review[0]["is_due"] is True
        # recalled when due: the next review moves out by days
        await c.post(
            "/api/questions/mc-half-dtype/attempts?run=false",
            json={"choices": await shown_at(c, "mc-half-dtype", 1)},
        )
        review = (await c.get("/api/progress")).json()["review"]
        assert review[0]["is_due"] is False and "day" in review[0]["due_in"]
        web.clock.advance(days=60)
        assert (await c.get("/api/progress")).json()["totals"]["due"] == 1


async def test_openapi_documents_the_api(web: Web) -> None:
    async with web.client() as c:
        schema = (await c.get("/openapi.json")).json()
        for path in (
            "/api/sets",
            "/api/questions/{question_id}/attempts",
            "/api/run",
            "/api/progress",
            "/healthz",
        ):
            assert path in schema["paths"]
        run = schema["paths"]["/api/run"]["post"]
        assert "429" in run["responses"]
        assert run["requestBody"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/RunIn"
        }
        docs = await c.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()


async def test_a_slow_database_read_in_the_api_holds_up_no_other_request(web: Web) -> None:
    """The API's database work runs in the page threads, as the pages' does: while one learner's
    /api/progress waits on a slow read (a PostgreSQL round trip far away, a locked SQLite file),
    the event loop answers everyone else."""
    async with web.client() as c:
        await assert_answered_while_held(c, c.app.state.web.store, "learner_data", "/api/progress")  # type: ignore[attr-defined]
