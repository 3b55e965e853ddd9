"""Interview mode through the real app (httpx, the session's sandbox pool, a temp SQLite file):
predict with a confidence, run edited code, notes, the report and its calibration; the links as
credentials (the candidate's never opens the interviewer's routes, a revoked one stops working);
the event log replayed after `Last-Event-ID`; the live fan-out in order; the CLI's two links."""

from __future__ import annotations

import asyncio
import html
import json
import re
from pathlib import Path

import httpx
import pytest

from app.cli import main as cli_main
from app.interview import model
from app.interview.live import Hub
from app.interview.report import calibration, progress
from app.store import Store
from tests.support.web import Web, assert_answered_while_held, form_in_page

pytestmark = pytest.mark.anyio


def _events(body: str) -> list[dict]:
    """The `data:` payloads of a text/event-stream body."""
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


async def _interview(
    client: httpx.AsyncClient, ids: list[str], minutes: int | None = None
) -> model.NewInterview:
    return model.create(client.app.state.web.store, ids, by="ada", minutes=minutes)  # type: ignore[attr-defined]


async def test_a_candidate_predicts_runs_and_the_report_adds_up(web: Web) -> None:
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype", "mc-half-dtype"], minutes=30)
        cand, host = f"/interview/{made.candidate_token}", f"/interviewer/{made.host_token}"
        assert (await client.post(cand + "/start")).status_code == 303
        first = await client.get(cand)
        assert (
            first.status_code == 200
            and "How sure are you?" in first.text
            and "data-deadline" in first.text
        )
        refused = await client.post(
            cand + "/predict", data={"output": "torch.float32", "confidence": "60"}
        )
        assert refused.status_code == 400  # only 50, 75 or 95
        # Refused, the form comes back as sent (it came back empty, the clock running).
        assert ">torch.float32</textarea>" in refused.text
        empty = await client.post(cand + "/predict", data={"output": "", "confidence": "75"})
        assert empty.status_code == 400 and re.search(
            r'value="75" required\s+checked', empty.text
        ), empty.text[-3000:]
        said = await client.post(
            cand + "/predict",
            data={"output": "torch.bfloat16 torch.Size([1, 2])", "confidence": "95"},
        )
        assert said.status_code == 303
        page = await client.get(cand)
        assert (
            "Right" in page.text and "95 % confidence" in page.text and 'id="run-form"' in page.text
        )
        edited = "import torch\nprint(torch.ones(2, dtype=torch.bfloat16).float().dtype)\n"
        ran = await client.post(cand + "/run/panel", data={"code": edited})
        assert ran.status_code == 200 and "torch.float32" in ran.text
        noted = await client.post(host + "/notes", data={"question": "po-linear-dtype", "text": "knows the list"},
                                  headers={"Accept": "application/json"})  # fmt: skip
        assert noted.status_code == 200
        assert (await client.post(cand + "/next")).status_code == 303
        wrong = form_in_page((await client.get(cand)).text, "mc-half-dtype", 0)  # float32
        await client.post(cand + "/predict", data={"choice": wrong, "confidence": "50"})
        await client.post(cand + "/next")
        assert "the interview is over" in (await client.get(cand)).text

        stream = await client.get(host + "/events", params={"replay": "true"})
        assert stream.headers["content-type"].startswith("text/event-stream")
        kinds = [e["kind"] for e in _events(stream.text)]
        assert kinds == [
            "created",
            "opened",
            "predicted",
            "run",
            "note",
            "next",
            "opened",
            "predicted",
            "finished",
        ]
        run = next(e for e in _events(stream.text) if e["kind"] == "run")["data"]
        assert "+print(torch.ones(2, dtype=torch.bfloat16).float().dtype)" in run["diff"]
        assert run["stdout"].strip() == "torch.float32" and run["status"] == "ok"

        r = (await client.get(host + "/report.json")).json()
        first_q, second_q = r["questions"]
        assert (first_q["correct"], first_q["confidence"], first_q["runs"], first_q["notes"]) == (
            True,
            95,
            1,
            "knows the list",
        )
        assert (
            first_q["truth"] == "torch.bfloat16 torch.Size([1, 2])"
            and first_q["seconds"] is not None
        )
        assert (second_q["correct"], second_q["confidence"], second_q["prediction"]) == (
            False,
            50,
            "`torch.float32`",
        )
        assert r["finished"] and r["calibration"]["brier"] == round(
            ((0.95 - 1) ** 2 + 0.5**2) / 2, 3
        )
        html = (await client.get(host + "/report")).text
        assert "knows the list" in html and "Calibration" in html
        # A choice's words are rendered (its backticks showed), an output shown as printed, units said.
        mc = html[html.index('data-report-row="mc-half-dtype"') :]
        assert (
            "<code>torch.float32</code>" in mc[: mc.index("</tr>")]
            and "`torch.float32`" not in html
        )
        assert '<code class="printed">torch.bfloat16 torch.Size([1, 2])</code>' in html
        assert "time limit 30 minutes" in html and re.search(r'data-label="Time">\d+ s<', html)


async def test_a_key_graded_on_the_authors_word_says_so_to_candidate_and_interviewer(
    web: Web,
) -> None:
    """A CUDA question on a CPU server with no CUDA record is graded on the author's answer: the
    learner's page said so beside the verdict; the candidate's, the live page and the report said
    nothing (an AMP expert's review). A key proved here says nothing of the kind."""
    async with web.client() as client:
        made = await _interview(client, ["po-needs-cuda", "po-linear-dtype"])
        cand, host = f"/interview/{made.candidate_token}", f"/interviewer/{made.host_token}"
        await client.post(cand + "/start")
        await client.post(cand + "/predict", data={"output": "torch.float16", "confidence": "95"})
        assert "Graded by the author's answer: no run on CUDA has proved it" in html.unescape(
            (await client.get(cand)).text
        )
        await client.post(cand + "/next")
        await client.post(
            cand + "/predict",
            data={"output": "torch.bfloat16 torch.Size([1, 2])", "confidence": "95"},
        )
        assert "Graded by the author" not in html.unescape((await client.get(cand)).text)
        stream = await client.get(host + "/events", params={"replay": "true"})
        predicted = [e["data"] for e in _events(stream.text) if e["kind"] == "predicted"]
        assert [p.get("authors_word", False) for p in predicted] == [True, False]
        report = (await client.get(host + "/report")).text
        assert report.count(
            "data-unproved"
        ) == 1 and "the author's answer: no run proved it" in html.unescape(report)
        assert [
            q["authors_word"] for q in (await client.get(host + "/report.json")).json()["questions"]
        ] == [True, False]


async def test_the_report_gives_the_key_of_a_question_never_predicted(web: Web) -> None:
    """The interviewer's report said "Truth —" for every question the candidate never reached (a
    phone walk): the key was only kept with a prediction."""
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype", "mc-half-dtype"], minutes=30)
        r = (await client.get(f"/interviewer/{made.host_token}/report.json")).json()
        truths = {q["id"]: (q["kind"], q["truth"], q["prediction"]) for q in r["questions"]}
        assert truths == {
            "po-linear-dtype": ("predict_output", "torch.bfloat16 torch.Size([1, 2])", None),
            "mc-half-dtype": ("multiple_choice", "`torch.float16`", None),
        }, truths
        html = (await client.get(f"/interviewer/{made.host_token}/report")).text
        assert (
            '<code class="printed">torch.bfloat16 torch.Size([1, 2])</code>' in html
            and "<code>torch.float16</code>" in html
        )


async def test_opening_the_link_never_starts_the_clock_pressing_start_does(web: Web) -> None:
    """A link preview or a mail scanner fetches the link before the candidate does: that must not
    open the first question or start the time limit."""
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype", "mc-half-dtype"], minutes=30)
        cand, host = f"/interview/{made.candidate_token}", f"/interviewer/{made.host_token}"
        for _ in range(2):
            before = await client.get(cand)
            assert before.status_code == 200 and "Start the interview" in before.text
            assert "30 minutes" in before.text and "2 questions" in before.text
            assert "data-deadline" not in before.text and "How sure are you?" not in before.text
        await client.post(cand + "/extend")  # no time to add to before it starts
        await client.post(cand + "/next")
        replay = {"replay": "true"}
        assert [
            e["kind"] for e in _events((await client.get(host + "/events", params=replay)).text)
        ] == ["created"]

        assert (await client.post(cand + "/start")).status_code == 303
        assert (
            await client.post(cand + "/start")
        ).status_code == 303  # twice (a double click): one start
        after = await client.get(cand)
        assert (
            "How sure are you?" in after.text
            and "data-deadline" in after.text
            and "Question 1 of 2" in after.text
        )
        assert (
            'href="/run"' not in after.text and 'href="/progress"' not in after.text
        )  # nothing leads off the interview
        events = _events((await client.get(host + "/events", params=replay)).text)
        assert [e["kind"] for e in events] == ["created", "opened"]
        assert events[1]["data"]["question"] == "po-linear-dtype"
        assert (
            progress(
                made.interview, model.events(client.app.state.web.store, made.interview.id)
            ).extra_s
            == 0
        )  # type: ignore[attr-defined,arg-type]


async def test_the_candidates_link_never_opens_the_interviewers_pages(web: Web) -> None:
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype"])
        host = f"/interviewer/{made.host_token}"
        await client.post(
            host + "/notes", data={"question": "po-linear-dtype", "text": "SECRET-NOTE"}
        )
        for path in ("", "/report", "/report.json", "/events?replay=true"):
            assert (
                await client.get(f"/interviewer/{made.candidate_token}{path}")
            ).status_code == 404, path
        assert (await client.post(f"/interviewer/{made.candidate_token}/revoke")).status_code == 404
        assert (await client.get(f"/interview/{made.host_token}")).status_code == 404
        assert "SECRET-NOTE" not in (await client.get(f"/interview/{made.candidate_token}")).text


async def test_a_revoked_link_stops_working(web: Web) -> None:
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype"])
        cand, host = f"/interview/{made.candidate_token}", f"/interviewer/{made.host_token}"
        assert (await client.get(cand)).status_code == 200
        assert (await client.post(host + "/revoke")).status_code == 303
        assert (await client.get(cand)).status_code == 404
        assert (
            await client.post(cand + "/predict", data={"output": "x", "confidence": "50"})
        ).status_code == 404
        assert (
            await client.post(cand + "/run/panel", data={"code": "print(1)"})
        ).status_code == 404
        assert "was revoked" in (await client.get(host)).text
        assert (await client.get(host + "/report.json")).json()["revoked"] is True


async def test_cant_run_before_predicting(web: Web) -> None:
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype"])
        cand = f"/interview/{made.candidate_token}"
        await client.get(cand)
        refused = await client.post(cand + "/run/panel", data={"code": "print(1)"})
        assert refused.status_code == 409 and "prediction first" in refused.text


async def test_a_reconnect_gets_only_what_it_missed(web: Web) -> None:
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype"])
        host = f"/interviewer/{made.host_token}"
        for text in ("one", "two", "three"):
            await client.post(host + "/notes", data={"question": "po-linear-dtype", "text": text})
        everything = _events((await client.get(host + "/events", params={"replay": "true"})).text)
        after = everything[1]["id"]
        rest = await client.get(
            host + "/events", params={"replay": "true"}, headers={"Last-Event-ID": str(after)}
        )
        assert [e["data"].get("text") for e in _events(rest.text)] == ["two", "three"]


async def test_the_hub_delivers_every_event_in_order(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'hub.db'}")
    made = model.create(store, ["q1"], by="ada")
    interview_id = made.interview.id
    assert interview_id is not None
    hub = Hub()
    got: list[int] = []

    async def follow() -> None:
        async for event in hub.follow(store, interview_id, ping_s=0.05):
            if event is not None:
                got.append(event.id)
                if len(got) == 41:
                    return

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.05)
    sent = await asyncio.gather(
        *(
            hub.record(store, interview_id, "note", {"question": "q1", "text": str(i)})
            for i in range(40)
        )
    )
    await asyncio.wait_for(follower, 10)
    assert got == sorted(got) and got[1:] == sorted(e.id for e in sent)  # the `created` event first
    assert hub.streams(interview_id) == 0
    store.close()


async def test_an_event_recorded_by_another_web_process_reaches_the_stream(tmp_path: Path) -> None:
    """The candidate's page and the interviewer's may be served by different processes
    (`serve --processes N`): each has its own Hub, and only the database in common."""
    store = Store(f"sqlite:///{tmp_path / 'hub.db'}")
    made = model.create(store, ["q1"], by="ada")
    interview_id = made.interview.id
    assert interview_id is not None
    watching, answering = Hub(), Hub()
    got: list[str] = []

    async def follow() -> None:
        async for event in watching.follow(store, interview_id):
            if event is not None and event.kind == "note":
                got.append(event.data["text"])
                if len(got) == 2:
                    return

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.1)
    for text in ("first", "second"):
        await answering.record(store, interview_id, "note", {"question": "q1", "text": text})
    await asyncio.wait_for(follower, 5)
    assert got == ["first", "second"]
    store.close()


def test_calibration_compares_confidence_with_outcomes(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    made = model.create(store, ["a", "b", "c"], by="ada")
    assert made.interview.id is not None
    for qid, conf, right in (("a", 95, True), ("b", 95, False), ("c", 50, True)):
        model.append(
            store,
            made.interview.id,
            "predicted",
            {"question": qid, "confidence": conf, "correct": right},
        )
    done = progress(made.interview, model.events(store, made.interview.id))
    c = calibration(done.questions)
    assert [r["right_percent"] for r in c["rows"]] == [100, None, 50]
    assert c["brier"] == round((0.05**2 + 0.95**2 + 0.5**2) / 3, 3)
    store.close()


def test_the_cli_prints_the_candidates_link_first(
    web: Web, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AMPQUIZ_DATABASE_URL", f"sqlite:///{web.db}")
    monkeypatch.setenv("AMPQUIZ_BANK", str(web.bank))
    assert (
        cli_main(
            [
                "interview",
                "new",
                "--questions",
                "po-linear-dtype,mc-half-dtype",
                "--minutes",
                "20",
                "--url",
                "http://x",
            ]
        )
        == 0
    )
    candidate, host = capsys.readouterr().out.split()
    assert candidate.startswith("http://x/interview/") and host.startswith("http://x/interviewer/")
    store = Store(f"sqlite:///{web.db}")
    found = model.by_candidate(store, candidate.rsplit("/", 1)[1])
    assert (
        found is not None
        and found.question_ids == ["po-linear-dtype", "mc-half-dtype"]
        and found.minutes == 20
    )
    assert model.by_host(store, host.rsplit("/", 1)[1]) == found
    assert cli_main(["interview", "new", "--questions", "no-such-id"]) == 1
    capsys.readouterr()
    assert cli_main(["interview", "revoke", candidate]) == 0
    assert model.by_candidate(store, candidate.rsplit("/", 1)[1]) is None
    store.close()


def test_the_cli_refuses_a_question_whose_record_contradicts_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The studio refused a held-back question; `interview new` made the interview with it, and
    no candidate could then be graded on it (an instructor's walk)."""
    from app.bank import load_bank
    from app.verify.record import question_hash, record_name
    from tests.support.planted import wrong_key_set

    (tmp_path / "planted.yaml").write_text(wrong_key_set("planted-fp16-max"))
    loaded = load_bank(tmp_path).question("planted-fp16-max")
    environment = {"device_kind": "cpu", "torch_version": "2.13.0", "date": "2026-11-27T10:00:00"}
    (tmp_path / "verified").mkdir()
    entry = {"result": "fail", "hash": question_hash(loaded.question)}
    body = {"environment": environment, "results": {loaded.id: entry}}
    (tmp_path / "verified" / record_name(environment)).write_text(json.dumps(body))
    monkeypatch.setenv("AMPQUIZ_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite'}")
    monkeypatch.setenv("AMPQUIZ_BANK", str(tmp_path))
    assert cli_main(["interview", "new", "--questions", "planted-fp16-max"]) == 1
    out = capsys.readouterr()
    assert (
        out.out == ""
        and "'planted-fp16-max' is under review (running it on CPU contradicted the key" in out.err
    )


async def test_an_interview_with_ad_hoc_snippets_keys_them_by_running_them(web: Web) -> None:
    from app import instructors

    async with web.client() as client:
        store = client.app.state.web.store  # type: ignore[attr-defined]
        instructors.add(store, "ada")
        token = instructors.new_link(store, "ada")
        assert (await client.post(f"/studio/sign-in/{token}")).status_code == 303
        raising = await client.post(
            "/studio/interviews", data={"adhoc": "print(1)\n---\nraise ValueError('no')\n"}
        )
        assert (
            raising.status_code == 400 and "ad-hoc snippet 2 did not run to the end" in raising.text
        )
        snippets = "import torch\nprint(torch.ones(2).half().sum().dtype)\n---\nprint(2 ** 10)\n"
        made = await client.post(
            "/studio/interviews", data={"questions": ["mc-half-dtype"], "adhoc": snippets}
        )
        assert made.status_code == 303
        host = made.headers["location"]
        link = re.search(r"/interview/[A-Za-z0-9_-]+", (await client.get(host)).text).group(0)
        await client.post(link + "/start")
        for _ in range(3):  # the bank question first, then the two snippets
            page = (await client.get(link)).text
            if "Snippet 1" in page:
                break
            right = form_in_page(page, "mc-half-dtype", 1)  # float16
            await client.post(link + "/predict", data={"choice": right, "confidence": "95"})
            await client.post(link + "/next")
        words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
        assert "Snippet 1" in words and "torch . ones ( 2 ) . half () . sum () . dtype" in words
        said = await client.post(
            link + "/predict", data={"output": "torch.float16", "confidence": "75"}
        )
        assert said.status_code == 303
        assert "Right" in (await client.get(link)).text  # what the snippet printed when it was made
        report = (await client.get(host + "/report.json")).json()
        assert [q["id"] for q in report["questions"]][:2] == ["mc-half-dtype", "snippet-1"]


async def test_past_the_time_limit_predictions_runs_and_the_extension_are_refused(web: Web) -> None:
    """The countdown on the page is the candidate's to ignore (a script, a stopped clock): the
    server refuses a prediction, a run or the extra time once the limit (and 15 s of grace for
    the request sent as it ran out) is past, and the interviewer's log shows nothing late."""
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype", "mc-half-dtype"], minutes=1)
        cand, host = f"/interview/{made.candidate_token}", f"/interviewer/{made.host_token}"
        assert (await client.post(cand + "/start")).status_code == 303  # the clock starts
        web.clock.advance(seconds=70)  # inside the grace
        said = await client.post(
            cand + "/predict", data={"output": "torch.float32", "confidence": "50"}
        )
        assert said.status_code == 303
        assert (await client.post(cand + "/next")).status_code == 303
        web.clock.advance(seconds=30)  # past it
        page = (await client.get(cand)).text  # says so, and offers nothing the server would refuse
        assert "data-time-up" in page and "/predict" not in page and "/extend" not in page
        late = await client.post(cand + "/predict", data={"choice": "0", "confidence": "50"})
        assert late.status_code == 409 and "Time is up" in late.text
        ran = await client.post(cand + "/run/panel", data={"code": "print(1)"})
        assert ran.status_code == 409 and "Time is up" in ran.text
        await client.post(cand + "/extend")
        stream = await client.get(host + "/events", params={"replay": "true"})
        kinds = [e["kind"] for e in _events(stream.text)]
        assert kinds.count("predicted") == 1 and "run" not in kinds and "extended" not in kinds, (
            kinds
        )
        # the page offers to finish, unpredicted as the question is, and the log then says so
        assert 'action="/interview/' in page and "Finish the interview" in page
        assert (await client.post(cand + "/next")).status_code == 303
        assert "data-interview-over" in (await client.get(cand)).text
        stream = await client.get(host + "/events", params={"replay": "true"})
        assert [e["kind"] for e in _events(stream.text)][-1] == "finished"
        assert (await client.get(host + "/report.json")).json()["finished"] is True


async def test_a_question_whose_key_is_under_review_never_strands_a_candidate(web: Web) -> None:
    """Its key contradicted by a run here, no prediction of it can be graded: the studio will not
    put it in a new interview, and a candidate already on it may go past it."""
    from app import instructors
    from app.verify.check import KeyCheck

    async with web.client() as client:
        state = client.app.state.web  # type: ignore[attr-defined]
        made = await _interview(client, ["po-linear-dtype", "mc-half-dtype"])
        cand = f"/interview/{made.candidate_token}"
        loaded = state.bank.question("po-linear-dtype")
        for _ in range(100):  # proved on load first: then a later run contradicts it
            if state.proof(loaded).state == "proved":
                break
            await asyncio.sleep(0.1)
        state.proofs.remember(
            loaded, KeyCheck(loaded.id, loaded.set_id, "fail", device="cpu", reason="planted")
        )
        assert state.proof(loaded).state == "held_back"

        await client.post(cand + "/start")
        page = (await client.get(cand)).text
        assert "data-under-review" in page and "How sure are you?" not in page
        assert (await client.post(cand + "/next")).status_code == 303
        assert "Question 2 of 2" in (await client.get(cand)).text

        instructors.add(state.store, "ada")
        assert (
            await client.post(f"/studio/sign-in/{instructors.new_link(state.store, 'ada')}")
        ).status_code == 303
        form = (await client.get("/studio/interviews/new")).text
        assert re.search(r'value="po-linear-dtype"[^>]* disabled', form), (
            "a held-back question cannot be picked"
        )
        assert "leaves no trace here" in form  # the bank is public: said where an interview is made
        refused = await client.post("/studio/interviews", data={"questions": ["mc-half-dtype", "po-linear-dtype"],
                                                                "minutes": "20", "adhoc": "print(1)\n"})  # fmt: skip
        assert refused.status_code == 400 and "under review" in refused.text
        # what was typed and picked is still there
        assert (
            re.search(r'value="mc-half-dtype"[^>]* checked', refused.text)
            and 'value="20"' in refused.text
        )
        assert ">print(1)\n</textarea>" in refused.text
        bad_minutes = await client.post(
            "/studio/interviews", data={"questions": ["mc-half-dtype"], "minutes": "abc"}
        )
        assert bad_minutes.status_code == 400 and "whole number of minutes" in bad_minutes.text
        # Too long a number is said on the form too, the picked question kept (a bare 422 page lost both).
        too_long = await client.post(
            "/studio/interviews", data={"questions": ["mc-half-dtype"], "minutes": "100000"}
        )
        assert too_long.status_code == 400 and "1 to 600" in too_long.text
        assert (
            re.search(r'value="mc-half-dtype"[^>]* checked', too_long.text)
            and 'maxlength="3"' in too_long.text
        )
        drawn = await client.post(
            "/studio/interviews", data={"adhoc": "import torch\nx = torch.rand(2)\nprint(x)\n"}
        )
        assert drawn.status_code == 400 and "printed something else when run again" in drawn.text
        # A coin flip agrees with itself on two runs half the time: what makes one is refused unrun.
        coin = await client.post(
            "/studio/interviews", data={"adhoc": "import random\nprint(random.random() < 0.5)\n"}
        )
        assert (
            coin.status_code == 400
            and "ad-hoc snippet 1 draws from Python&#39;s random module" in coin.text
        ), coin.text
        # Nothing printed is no answer a candidate can send.
        silent = await client.post("/studio/interviews", data={"adhoc": "x = 1\n"})
        assert silent.status_code == 400 and "ad-hoc snippet 1 printed nothing" in silent.text


async def test_a_slow_read_of_an_interview_holds_up_no_other_request(web: Web) -> None:
    """An interview's pages read its events in the page threads: a slow read (a PostgreSQL round
    trip far away, a locked SQLite file) keeps the event loop answering everyone else."""
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype"], minutes=30)
        await assert_answered_while_held(
            client, model, "events", f"/interview/{made.candidate_token}"
        )


async def test_a_question_keeps_a_bounded_number_of_runs(
    web: Web, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run is an event holding its code, read by every page of the interview: a candidate's
    loop grew the log, and each page, without end."""
    from app.web.routes import interview as interview_routes

    monkeypatch.setattr(interview_routes, "RUNS_PER_QUESTION", 2)
    async with web.client() as client:
        made = await _interview(client, ["po-linear-dtype"], minutes=30)
        cand, host = f"/interview/{made.candidate_token}", f"/interviewer/{made.host_token}"
        await client.post(cand + "/start")
        said = await client.post(
            cand + "/predict", data={"output": "torch.float32", "confidence": "50"}
        )
        assert said.status_code == 303
        for n in range(2):
            ran = await client.post(cand + "/run/panel", data={"code": f"print({n})"})
            assert ran.status_code == 200, ran.text
        refused = await client.post(cand + "/run/panel", data={"code": "print(2)"})
        assert (
            refused.status_code == 429
            and "has been run 2 times, the most one interview keeps" in refused.text
        )
        kinds = [
            e["kind"]
            for e in _events((await client.get(host + "/events", params={"replay": "true"})).text)
        ]
        assert kinds.count("run") == 2
