"""The HTML pages, used as a browser without JavaScript would: read, answer with forms, run code."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

import pytest

from app.bank import load_bank
from app.bank.public import title_of
from tests.support.web import Web, form_at

pytestmark = pytest.mark.anyio

from tests.support.cli import REPO


def text_of(html: str) -> str:
    """The page's words, roughly as a reader sees them."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


async def test_home_lists_sets_topics_and_counts(web: Web) -> None:
    async with web.client() as c:
        page = await c.get("/")
        assert page.status_code == 200
        words = text_of(page.text)
        assert "Basics for tests" in words and "4 questions" in words
        assert "A small set used by the web tests." in words  # the description's Markdown, rendered
        assert "autocast-basics" in words and "dtypes" in words
        assert "A file mid-edit" not in words


async def test_home_says_where_to_start_then_where_to_go_on(web: Web) -> None:
    async with web.client() as c:
        page = (await c.get("/")).text
        home = text_of(page)
        assert "Start with “Basics for tests”" in home
        # Straight to the set's first question, not to its list: one tap fewer on the way in.
        assert re.search(r'href="/questions/po-linear-dtype">Start with', page)
        assert (
            "New to mixed precision?" in home and "GradScaler Multiplies the loss" in home
        )  # a primer, folded
        await c.post(
            "/questions/mc-half-dtype", data={"choice": await form_at(c, "mc-half-dtype", 1)}
        )
        page = (await c.get("/")).text
        words = text_of(page)
        assert "Continue with “Basics for tests”" in words and "Start with" not in words
        assert re.search(
            r'href="/questions/po-linear-dtype">Continue with', page
        )  # the first not answered


async def test_half_of_a_many_answer_question_says_how_far_it_got(web: Web) -> None:
    async with web.client() as c:
        said = await c.post(
            "/questions/mc-sixteen-bit", data={"choice": await form_at(c, "mc-sixteen-bit", 0)}
        )
        words = text_of((await c.get(said.headers["location"])).text)
        assert "Not quite" in words and "1 of the 2 right answers picked" in words
        assert "your answer · correct" in words and "also correct: you missed it" in words


async def test_set_page_shows_each_questions_status(web: Web) -> None:
    async with web.client() as c:
        await c.post(
            "/questions/mc-half-dtype", data={"choice": await form_at(c, "mc-half-dtype", 0)}
        )
        await c.post(
            "/questions/mc-sixteen-bit", data={"choice": await form_at(c, "mc-sixteen-bit", 0, 1)}
        )
        page = (await c.get("/sets/basics")).text
        rows = re.findall(
            r'<li class="question-row status-(\w+)">\s*<a href="/questions/([\w-]+)"', page
        )
        assert rows == [
            ("new", "po-linear-dtype"),
            ("wrong", "mc-half-dtype"),
            ("right", "mc-sixteen-bit"),
            ("new", "po-needs-cuda"),
        ]
        web.clock.advance(hours=1)
        page = (await c.get("/sets/basics")).text
        assert 'status-due"><a href="/questions/mc-half-dtype"' in page.replace(">\n    <a", "><a")
        # The difficulty in words, not only dots with a tooltip (none is shown on a touch screen).
        assert re.search(r'class="difficulty-word">(warm-up|medium|hard)</span>', page)


async def test_question_page_renders_markdown_safely_and_highlights_code(web: Web) -> None:
    async with web.client() as c:
        page = (await c.get("/questions/po-linear-dtype")).text
        assert "<script>alert" not in page and "&lt;script&gt;alert" in page
        assert '<span id="L-3">' in page and '<span class="k">with</span>' in page
        assert 'name="output"' in page and 'href="/run?q=po-linear-dtype"' in page
        assert "verified by running on CPU · torch" in page and "(on this server)" in page
        assert "not yet verified on CUDA" in page
        mc = (await c.get("/questions/mc-sixteen-bit")).text
        assert mc.count('type="checkbox" name="choice"') == 3 and "Pick every right answer" in mc
        cuda = (await c.get("/questions/po-needs-cuda")).text
        assert "needs a CUDA GPU; this server has none" in cuda


async def test_answering_wrong_shows_feedback_the_key_and_the_explained_run(web: Web) -> None:
    async with web.client() as c:
        r = await c.post("/questions/po-linear-dtype", data={"output": "torch.float32"})
        assert r.status_code == 303
        assert re.fullmatch(
            r"/questions/po-linear-dtype\?attempt=\d+#result", r.headers["location"]
        )
        page = (await c.get(r.headers["location"])).text
        words = text_of(page)
        assert "Not quite" in words and "You said torch.float32" in words
        assert "It prints torch.bfloat16 torch.Size([1, 2])" in words
        assert "EXPLANATION-PO" in words
        assert (
            "Op trace" in words
            and "torch.nn.functional.linear" in words
            and "bfloat16 [1, 2]" in words
        )
        assert "Try it again" in words

        web.clock.advance(
            minutes=11
        )  # back for review: an answer counts again (before, it is practice)
        r = await c.post(
            "/questions/po-linear-dtype", data={"output": "torch.bfloat16 torch.Size([1, 2])"}
        )
        page = (await c.get(r.headers["location"])).text
        assert "Right!" in text_of(page)


async def test_a_long_prediction_over_many_lines_is_taken_and_one_too_long_comes_back_as_typed(
    web: Web,
) -> None:
    """A browser sends each line break of the prediction box as CR LF, where the box's own limit
    (maxlength) counted one character: 2,000 characters over 15 lines arrived as 2,015 and were
    refused with a bare 422 page, the text lost. One really too long is refused on the question
    page itself, with what was typed still in the box."""
    import html

    typed = "\r\n".join(["x" * 124] * 16)  # 16 lines: 1,984 characters and 15 line breaks
    assert len(typed.replace("\r\n", "\n")) == 1999 and len(typed) == 2014
    async with web.client() as c:
        r = await c.post("/questions/po-linear-dtype", data={"output": typed})
        assert r.status_code == 303, r.text[:300]
        page = (await c.get(r.headers["location"])).text
        assert "Not quite" in text_of(page)

        too_long = typed + "\r\n" + "y" * 40
        r = await c.post("/questions/po-linear-dtype", data={"output": too_long})
        assert r.status_code == 400
        assert (
            "That prediction is 2,040 characters long; the most it may be is 2,000."
            in html.unescape(r.text)
        )
        textarea = re.search(r'<textarea id="output"[^>]*>\n(.*?)</textarea>', r.text, re.DOTALL)
        assert textarea and html.unescape(textarea.group(1)).replace(
            "\r\n", "\n"
        ) == too_long.replace("\r\n", "\n")

        # The API counts it the same way: what the page takes, it takes (it counted CR LF as two).
        api = await c.post(
            "/api/questions/po-linear-dtype/attempts?run=false", json={"output": typed}
        )
        assert api.status_code == 200, api.text[:300]
        assert (
            await c.post(
                "/api/questions/po-linear-dtype/attempts?run=false", json={"output": too_long}
            )
        ).status_code == 422


async def test_multiple_choice_form_feedback_for_the_pick(web: Web) -> None:
    async with web.client() as c:
        r = await c.post(
            "/questions/mc-half-dtype",
            data={"choice": await form_at(c, "mc-half-dtype", 2)},
            follow_redirects=True,
        )
        words = text_of(r.text)
        assert "Not quite" in words
        assert (
            "WHY-C-WRONG" in words and "WHY-B-RIGHT" in words
        )  # the pick's feedback and the right one's
        assert "your answer" in words and "the correct answer" in words
        assert "Why the other choices are wrong" in words and "WHY-A-WRONG" in words
        assert "EXPLANATION-MC" in words
        assert "torch.float16" in words and "Output" in words  # the run printed the key

        empty = await c.post("/questions/mc-half-dtype", data={})
        assert empty.status_code == 400 and "Pick an answer first." in empty.text
        other = await c.get(
            "/questions/mc-sixteen-bit?attempt=1"
        )  # someone's attempt at another question
        assert "Not quite" not in other.text and "Right!" not in other.text


async def test_playground_runs_without_javascript(web: Web) -> None:
    async with web.client() as c:
        page = (await c.get("/run")).text
        assert '<textarea name="code"' in page and "torch.autocast" in page
        prefilled = (await c.get("/run?q=mc-half-dtype")).text
        assert "print(torch.ones(2).half().dtype)" in prefilled
        # Started from a question: named by its title, as everywhere else, not by its id.
        title = title_of(c.app.state.web.bank.question("mc-half-dtype"))  # type: ignore[attr-defined]
        assert (
            f'Started from the question “<a href="/questions/mc-half-dtype">{title}</a>”'
            in prefilled
        )
        # running an unanswered question's code gives its answer away, whatever its kind: said first
        for question in ("mc-half-dtype", "po-linear-dtype"):
            assert "gives away the answer" in text_of((await c.get(f"/run?q={question}")).text), (
                question
            )
        await c.post(
            "/questions/mc-half-dtype", data={"choice": await form_at(c, "mc-half-dtype", 0)}
        )
        assert "gives away the answer" not in text_of((await c.get("/run?q=mc-half-dtype")).text)
        ran = await c.post("/run", data={"code": "print('hello from the sandbox')"})
        assert ran.status_code == 200 and "hello from the sandbox" in text_of(ran.text)
        panel = await c.post(
            "/run/panel",
            data={"code": "import torch\nprint(torch.ones(1).half() * 70000)", "explain": "true"},
        )
        assert panel.status_code == 200 and "<html" not in panel.text
        assert "tensor([inf]" in panel.text and "Op trace" in panel.text


async def test_progress_page_shows_history_topics_and_review(web: Web) -> None:
    async with web.client() as c:
        empty = text_of((await c.get("/progress")).text)
        assert "No attempts yet." in empty and "Nothing to review yet." in empty
        await c.post(
            "/questions/mc-half-dtype", data={"choice": await form_at(c, "mc-half-dtype", 0)}
        )
        await c.post(
            "/questions/mc-sixteen-bit", data={"choice": await form_at(c, "mc-sixteen-bit", 0, 1)}
        )
        page = (await c.get("/progress")).text
        words = text_of(page)
        assert "Mc half dtype" in words and "Mc sixteen bit" in words
        # When each was answered: exact for the browser's local-time script, in UTC for a reader without it.
        times = re.findall(r'<time datetime="([^"]+)" data-local-time>([^<]+)</time>', page)
        assert len(times) == 2 and all(datetime.fromisoformat(iso) for iso, _ in times)
        assert all(
            shown == datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
            for iso, shown in times
        )
        assert "✗ wrong" in words and "✓ right" in words
        assert "50%" in words  # dtypes: 1 of 2 attempts right
        assert "next review in 10 minutes" in words
        # Why this list and a set's "to revisit" may differ (a newcomer saw 6 there and 7 here).
        assert (
            "data-queue-says" in page
            and "data-queue-says" not in (await c.get("/progress", headers={"Cookie": ""})).text
        )


async def test_a_question_changed_since_it_was_answered_starts_afresh(web: Web) -> None:
    """An answer and a review card belong to the question as it was: once its text changes, it
    is new again, out of the review queue, and its history row says it changed since."""
    async with web.client() as c:
        c.app.state.web.live_bank.check_every_s = 0  # type: ignore[attr-defined]
        await c.post(
            "/questions/mc-half-dtype", data={"choice": await form_at(c, "mc-half-dtype", 0)}
        )  # wrong: a card is made
        await c.post(
            "/questions/mc-sixteen-bit", data={"choice": await form_at(c, "mc-sixteen-bit", 0)}
        )  # wrong too, and unchanged
        before = (await c.get("/api/progress")).json()
        assert [r["question_id"] for r in before["review"]] == ["mc-half-dtype", "mc-sixteen-bit"]
        path = web.bank / "basics.yaml"
        path.write_text(
            path.read_text().replace(
                "prompt: Which dtype does this print?", "prompt: Which dtype is printed?"
            )
        )
        for _ in range(100):  # the watcher thread picks the edit up within its check interval
            after = (await c.get("/api/progress")).json()
            if after["totals"]["answered"] == 1:
                break
            await asyncio.sleep(0.02)
        assert after["totals"]["answered"] == 1 and [r["question_id"] for r in after["review"]] == [
            "mc-sixteen-bit"
        ]
        assert (await c.get("/api/questions/mc-half-dtype")).json()["status"] == "new"
        words = text_of((await c.get("/progress")).text)
        assert "the question has changed since" in words and "1 due for review" not in words


async def test_every_question_in_the_real_bank_renders(web: Web) -> None:
    """The bank other people are writing: each page renders (bad files are left out, not fatal)."""
    bank_dir = REPO / "questions"
    bank = load_bank(bank_dir)
    verified = 0
    async with web.client(bank=bank_dir) as c:
        assert (await c.get("/")).status_code == 200
        for s in bank.sets:
            assert (await c.get(f"/sets/{s.id}")).status_code == 200
        for q in bank.questions:
            page = await c.get(f"/questions/{q.id}")
            assert page.status_code == 200, q.id
            assert 'class="answer"' in page.text
            verified += "verified by running on CPU · torch" in page.text
    assert bank.questions and verified  # the committed CPU record shows as badges


async def test_a_set_added_while_the_server_runs_is_served(web: Web) -> None:
    async with web.client() as c:
        c.app.state.web.live_bank.check_every_s = 0  # type: ignore[attr-defined]
        assert (await c.get("/sets/extra")).status_code == 404
        (web.bank / "extra.yaml").write_text(
            "title: Added later\ndescription: Written while the server ran.\nquestions:\n"
            '  - {id: extra-one, kind: multiple_choice, topic: extra, difficulty: 1, prompt: "Which one?",\n'
            "     explanation: Because., source: tests,\n"
            "     choices: [{text: this, correct: true, why: Right.}, {text: that, correct: false, why: Wrong.}]}\n"
        )
        for _ in range(100):  # the watcher thread picks it up within its check interval
            page = await c.get("/sets/extra")
            if page.status_code == 200:
                break
            await asyncio.sleep(0.02)
        assert page.status_code == 200 and "Added later" in page.text
        assert (await c.get("/api/questions/extra-one")).json()["set_id"] == "extra"


@pytest.mark.parametrize(
    "explanation",
    [
        {},
        {"summary": "not a list", "ops": None, "scaler": "?", "hazards": 3},
        {"ops": [{}], "scaler": [{}], "hazards": [{}], "ops_truncated": True},
        {
            "ops": [
                {"name": "torch.mm", "inputs": [None, "odd"], "output": "float16", "casts": [{}]}
            ]
        },
        {
            "scaler": [{"event": "something_new", "line": 3, "detail": 1.0}],
            "error": "tracer stopped",
        },
    ],
)
def test_the_run_panel_renders_partial_explanations(explanation: dict) -> None:
    """Explanations come from another process and another engineer's module: any missing or odd
    key must leave the rest of the result readable."""
    from app.web.rendering.render import make_templates

    run = {
        "status": "ok",
        "stdout": "tensor([1.])\n",
        "stderr": "",
        "exception": None,
        "warnings": [{"category": "UserWarning", "message": "careful"}],
        "duration_ms": 12.5,
        "environment": {},
        "message": "",
        "explanation": explanation,
    }
    html = make_templates().env.get_template("_run.html").render(run=run)
    assert "tensor([1.])" in html and "careful" in html


def test_a_hazards_line_op_and_message_read_as_words_apart() -> None:
    """The templates trim the newline after a block tag: "line 14Tensor.backward" (a newcomer's walk)."""
    from app.web.rendering.render import make_templates

    run = {"status": "ok", "stdout": "", "stderr": "", "exception": None, "warnings": [], "duration_ms": 1.0,
           "environment": {}, "message": "",
           "explanation": {"hazards": [{"kind": "underflow", "line": 14, "op": "Tensor.backward", "message": "went to zero"}]}}  # fmt: skip
    html = make_templates().env.get_template("_run.html").render(run=run)
    shown = re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", "", html)
    )  # tags gone, nothing added: as a browser shows it
    assert "line 14 Tensor.backward went to zero" in shown


def test_a_raised_exception_is_told_once_in_its_own_box() -> None:
    """A playground run that raised said so three times: the run's message, the exception's box and
    the first line of "What happened" (a newcomer's walk). The box says it; the rest still shows."""
    from app.web.rendering.render import make_templates

    run = {"status": "error", "stdout": "", "stderr": "", "warnings": [], "duration_ms": 1.0, "environment": {},
           "message": "The snippet raised ValueError on line 4.",
           "exception": {"type": "ValueError", "message": "boom", "line": 4, "traceback": ""},
           "explanation": {"summary": ["The snippet raised ValueError on line 4: boom.", "Tensor.mul on line 3 overflowed in float16."]}}  # fmt: skip
    shown = re.sub(
        r"\s+",
        " ",
        re.sub(r"<[^>]+>", "", make_templates().env.get_template("_run.html").render(run=run)),
    )
    assert "The snippet raised" not in shown and "Raised ValueError at line 4: boom" in shown
    assert "Tensor.mul on line 3 overflowed in float16." in shown  # the rest of what happened


def test_templates_read_a_dicts_keys_and_methods_as_jinja_does() -> None:
    """Pages read a run's report (dicts) as `value.name`, by the key at once: a key is its value,
    a dict method's name is still the method even where a key has that name, and a missing key
    is undefined (nothing shown, not an error)."""
    from app.web.rendering.render import make_templates

    env = make_templates().env
    report = {"kind": "autocast", "items": "a key named like a method", "count": 0}
    page = env.from_string(
        "{{ r.kind }}|{{ r.count }}|{{ r.missing }}|{{ r.items() | list | length }}|{{ r.get('kind') }}"
    )
    assert page.render(r=report) == "autocast|0||3|autocast"


def test_pages_escape_what_they_show_as_markupsafe_does() -> None:
    """Pages write values through their own escaping step (`escaped_text`): text, numbers and
    objects are escaped; Markup, a macro's output and `|safe` are written as they are; an
    undefined value writes nothing, and `{% autoescape false %}` turns escaping off."""
    from markupsafe import Markup, escape

    from app.web.rendering.render import make_templates

    env = make_templates().env

    class Shown:
        def __str__(self) -> str:
            return "<obj & 'quote'>"

    values = [
        "<script>alert('x')</script>",
        'a "b" & c',
        3,
        2.5,
        None,
        Shown(),
        Markup("<b>bold</b>"),
    ]
    page = env.from_string("{% for v in values %}{{ v }}|{% endfor %}{{ nothing }}")
    assert page.render(values=values) == "".join(f"{escape(v)}|" for v in values)
    macro = env.from_string(
        "{% macro m(x) %}<i>{{ x }}</i>{% endmacro %}{{ m('<z>') }}{{ '<y>' | safe }}"
    )
    assert macro.render() == "<i>&lt;z&gt;</i><y>"
    assert (
        env.from_string("{% autoescape false %}{{ v }}{% endautoescape %}").render(v="<x>") == "<x>"
    )


async def test_a_review_session_walks_the_due_questions_and_reschedules_them(web: Web) -> None:
    """Three missed questions come due (the clock moves on), are reviewed one after another, and
    are rescheduled further out; the home page says how many are due."""
    async with web.client() as c:
        missed = {"po-linear-dtype": {"output": "torch.float32"}, "mc-half-dtype": {"choice": await form_at(c, "mc-half-dtype", 0)},
                  "mc-sixteen-bit": {"choice": await form_at(c, "mc-sixteen-bit", 2)}}  # fmt: skip
        right = {"po-linear-dtype": {"output": "torch.bfloat16 torch.Size([1, 2])"},
                 "mc-half-dtype": {"choice": await form_at(c, "mc-half-dtype", 1)},
                 "mc-sixteen-bit": {"choice": await form_at(c, "mc-sixteen-bit", 0, 1)}}  # fmt: skip
        for qid, answer in missed.items():
            assert (await c.post(f"/questions/{qid}", data=answer)).status_code == 303
        waiting = (await c.get("/review")).text
        assert "Nothing is due" in waiting  # missed just now: not due yet
        # ...and what comes back, and when, is listed there (it was only on the progress page)
        assert "Coming back later" in waiting and all(
            f'href="/questions/{qid}"' in waiting for qid in missed
        )
        assert "in 10 minutes · missed 1×" in text_of(waiting)
        web.clock.advance(minutes=11)
        home = (await c.get("/")).text
        assert "Review now: 3 due" in home
        # From the home page, straight into the session's first due question.
        begun = await c.get("/review/start")
        first = await c.get(begun.headers["location"])
        assert begun.status_code == 303 and first.headers["location"].startswith("/questions/")
        assert 'href="/review/start">Review now: 3 due' in (await c.get("/")).text
        start = (await c.get("/review")).text
        since = re.search(r'href="/review/next\?since=([^"]+)"', start).group(1)
        seen = []
        nxt = await c.get(f"/review/next?since={since}")
        while nxt.headers["location"].startswith("/questions/"):
            qid = nxt.headers["location"].split("/")[2].split("?")[0]
            seen.append(qid)
            page = (await c.get(nxt.headers["location"])).text
            assert "Review session" in page and f"{4 - len(seen)} due, this one included" in page
            form = {**right[qid], "review": since}
            answered = await c.post(f"/questions/{qid}", data=form)
            result = (await c.get(answered.headers["location"])).text
            assert "Right!" in result and f"/review/next?since={since}" in result
            assert (
                'rel="next"' not in result and 'rel="prev"' not in result
            )  # no way out of the session unsaid
            web.clock.advance(seconds=30)
            nxt = await c.get(f"/review/next?since={since}")
            assert len(seen) <= 3
        assert sorted(seen) == sorted(missed)
        done = (await c.get(nxt.headers["location"])).text
        assert "You reviewed 3 questions: 3 right." in done
        assert done.count("next review in") == 3  # each rescheduled, none due now
        # Not a dead end: when the rest comes back, and a way back to practising.
        assert re.search(
            r"3 more come back for review later, the first in \d+ (minutes|hours|days)",
            text_of(done),
        )
        # Read as the browser shows it (tags gone, nothing added): the sentences ran together.
        assert re.search(r"3 right\. 3 more come back", re.sub(r"<[^>]+>", "", done)), done
        assert '<a class="button primary" href="/">Back to practice</a>' in done
        assert "Nothing is due" in (await c.get("/review")).text
        queue = (await c.get("/api/progress")).json()["review"]
        assert all(not r["is_due"] for r in queue) and len(queue) == 3


async def test_an_answer_just_after_the_key_was_shown_is_practice_until_the_question_comes_back(
    web: Web,
) -> None:
    """A wrong answer shows the key; "Try it again" with it in sight marked the question right and
    took it off "to revisit" (an attacker's review and a newcomer's walk both did so). Until the
    question comes back for review, an answer is graded and shown, not recorded."""
    right = "torch.bfloat16 torch.Size([1, 2])"
    async with web.client() as c:
        assert (
            await c.post("/questions/po-linear-dtype", data={"output": "torch.float32"})
        ).status_code == 303
        again = await c.post("/questions/po-linear-dtype", data={"output": right})
        assert again.status_code == 200 and "Right!" in again.text, again.text[-2000:]
        assert "Practice, not recorded" in text_of(
            again.text
        ) and "comes back for review, in 10 minutes" in text_of(again.text)
        by_api = await c.post("/api/questions/po-linear-dtype/attempts", json={"output": right})
        body = by_api.json()
        assert (
            by_api.status_code == 200 and body["correct"] is True and body["recorded"] is False
        ), body
        assert body["attempt_id"] is None and body["counts_again_at"] and body["status"] == "wrong"
        progress = (await c.get("/api/progress")).json()
        assert progress["totals"]["attempts"] == 1 and progress["totals"]["right"] == 0, progress[
            "totals"
        ]
        # Back for review, an answer counts again.
        web.clock.advance(minutes=11)
        counted = await c.post("/api/questions/po-linear-dtype/attempts", json={"output": right})
        assert counted.json()["recorded"] is True and counted.json()["status"] == "right", (
            counted.json()
        )


async def test_a_link_cut_short_or_mistyped_sends_the_learner_on_instead_of_a_422(web: Web) -> None:
    """A bookmarked /review/next or /review/done (no session moment) and `?attempt=abc` gave a page
    saying only "since: Field required" or "Input should be a valid integer" (a newcomer's walk)."""
    async with web.client() as c:
        begun = await c.get("/review/next")
        assert begun.status_code == 303 and begun.headers["location"] == "/review/start"
        for url in ("/review/done", "/review/done?since=yesterday"):
            back = await c.get(url)
            assert back.status_code == 303 and back.headers["location"] == "/review", url
        for url in (
            "/questions/po-linear-dtype?attempt=abc",
            "/questions/po-linear-dtype?attempt=1x&review=soon",
        ):
            page = await c.get(url)
            assert page.status_code == 200 and "What does it print?" in page.text, url
            assert "Review session" not in page.text


async def test_the_pages_files_are_kept_by_the_browser_until_a_deploy_changes_them(
    web: Web,
) -> None:
    """A page's CSS, scripts and icon are fetched once: their URLs carry the files' hash, and each
    is sent to be kept a year. A URL without the current hash is checked each time instead, and
    none of them sets a learner cookie (no shared cache keeps a response that does)."""
    async with web.client() as c:
        page = (await c.get("/")).text
        linked = re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
        assert {url.split("?")[0] for url in linked} >= {
            "/static/app.css",
            "/static/app.js",
            "/static/favicon.svg",
        }
        assert len({url.split("?v=")[1] for url in linked}) == 1, linked
        c.cookies.clear()  # a first visit's files, fetched beside the page
        for url in linked:
            got = await c.get(url)
            assert got.status_code == 200
            assert got.headers["cache-control"] == "public, max-age=31536000, immutable", url
            assert "set-cookie" not in got.headers, url
        stale = await c.get(linked[0].split("?")[0] + "?v=0000000000")
        assert stale.status_code == 200 and stale.headers["cache-control"] == "no-cache"
        asked_again = await c.get(linked[0], headers={"if-none-match": stale.headers["etag"]})
        assert (
            asked_again.status_code == 304 and "immutable" in asked_again.headers["cache-control"]
        )


def test_history_times_are_written_in_utc_whatever_zone_they_come_in() -> None:
    """One instant in two zones is one cache key: what is written must not depend on the zone."""
    from datetime import timedelta, timezone

    from app.web.rendering.render import iso, utc_minute

    new_york = datetime(2026, 11, 26, 6, 45, tzinfo=timezone(timedelta(hours=-5)))
    for at in (new_york, new_york.astimezone(UTC)):
        assert (iso(at), utc_minute(at)) == ("2026-11-26T11:45:00+00:00", "2026-11-26 11:45")


async def test_the_playground_by_its_name_and_the_studio_told_in_plain_words(web: Web) -> None:
    """The header says "Playground" and /playground was a 404; the studio's refusal showed a
    Markdown command with its backticks on a page that renders none (a newcomer's walk)."""
    async with web.client() as c:
        moved = await c.get("/playground")
        assert moved.status_code == 301 and moved.headers["location"] == "/run"
        refused = await c.get("/studio", headers={"Accept": "text/html"})
        assert (
            refused.status_code == 403
            and "\u201campquiz instructor link NAME\u201d" in refused.text
        )
        assert "`ampquiz" not in refused.text
