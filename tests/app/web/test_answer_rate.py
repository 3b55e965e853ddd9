"""How fast answers are taken: a learner's and an address's answers per minute (app.web.answer_rate)."""

from __future__ import annotations

import html
import re

import pytest

from app.web.answer_rate import AnswerRate, TooManyAnswers
from tests.support.web import Web, form_at

# --- the buckets, on a clock the test moves ------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_learner_gets_a_burst_then_one_answer_per_refill() -> None:
    clock = Clock()
    rate = AnswerRate(per_learner=3, per_address=0, clock=clock)
    for _ in range(3):
        rate.take("ann", "10.0.0.1")
    with pytest.raises(TooManyAnswers) as refused:
        rate.take("ann", "10.0.0.1")
    assert refused.value.status == 429 and refused.value.retry_after_s == 20  # 60 s / 3
    assert refused.value.headers == {"Retry-After": "20"}
    rate.take("bob", "10.0.0.1")  # another learner at the same address: a bucket of their own
    clock.now += 20
    rate.take("ann", "10.0.0.1")
    with pytest.raises(TooManyAnswers):
        rate.take("ann", "10.0.0.1")


def test_an_address_is_one_bucket_whatever_cookies_it_sends() -> None:
    rate = AnswerRate(per_learner=60, per_address=5, clock=Clock())
    for n in range(5):
        rate.take(f"fresh-{n}", "203.0.113.9")
    with pytest.raises(TooManyAnswers) as refused:
        rate.take("fresh-5", "203.0.113.9")
    assert "Your network" in refused.value.message
    rate.take("fresh-6", "203.0.113.10")


def test_a_refused_answer_costs_nothing_and_zero_is_no_limit() -> None:
    clock = Clock()
    rate = AnswerRate(per_learner=2, per_address=2, clock=clock)
    rate.take("ann", "a")
    rate.take("bob", "a")
    for _ in range(5):  # refused by the address: ann's own bucket is not drawn from
        with pytest.raises(TooManyAnswers):
            rate.take("ann", "a")
    rate.take("ann", "b")
    unlimited = AnswerRate(per_learner=0, per_address=0, clock=clock)
    for _ in range(10_000):
        unlimited.take("ann", "a")
    assert unlimited.buckets == {}


def test_the_buckets_kept_stay_bounded() -> None:
    clock = Clock()
    rate = AnswerRate(per_learner=10, per_address=0, clock=clock)
    for n in range(250_001):
        rate.take(f"learner-{n}", "a")
    assert len(rate.buckets) <= 100_000


# --- through the app ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_page_refuses_an_answer_past_the_rate_and_keeps_what_was_typed(web: Web) -> None:
    async with web.client(answers_per_minute=2) as c:
        for expected in (303, 200):  # stored, then practice (its key was shown): both count
            r = await c.post("/questions/po-linear-dtype", data={"output": "torch.float32"})
            assert r.status_code == expected
        typed = "torch.float16 torch.Size([1, 2])\n<b>second line</b>"
        r = await c.post("/questions/po-linear-dtype", data={"output": typed})
        assert r.status_code == 429 and r.headers["retry-after"] == "30"
        assert "more answers in the last minute than one learner may: wait 30 s" in html.unescape(
            r.text
        )
        textarea = re.search(r'<textarea id="output"[^>]*>\n(.*?)</textarea>', r.text, re.DOTALL)
        assert textarea and html.unescape(textarea.group(1)) == typed
        picked = await form_at(c, "mc-half-dtype", 1)
        r = await c.post("/questions/mc-half-dtype", data={"choice": picked})
        assert r.status_code == 429
        assert re.search(rf'name="choice" value="{picked[0]}" checked>', r.text)
        store = c.app.state.web.store  # type: ignore[attr-defined]
        assert (
            len(store.all_attempts()) == 1
        )  # the one stored; practice and the refused ones never are


@pytest.mark.anyio
async def test_the_api_refuses_past_the_rate_and_a_cookieless_flood_stops_at_the_address(
    web: Web,
) -> None:
    async with web.client(answers_per_minute=100, answers_per_minute_per_address=3) as c:
        for _ in range(3):
            c.cookies.clear()  # a new learner every time
            r = await c.post(
                "/api/questions/po-linear-dtype/attempts",
                json={"output": "x"},
                params={"run": "false"},
            )
            assert r.status_code == 200, r.text
        c.cookies.clear()
        r = await c.post(
            "/api/questions/po-linear-dtype/attempts", json={"output": "x"}, params={"run": "false"}
        )
        assert r.status_code == 429 and r.headers["retry-after"] == "20"
        body = r.json()
        assert body["ok"] is False and body["status"] == 429 and "Your network" in body["error"]
        store = c.app.state.web.store  # type: ignore[attr-defined]
        assert len(store.all_attempts()) == 3  # the refused one was never stored


@pytest.mark.anyio
async def test_only_answers_taken_count_and_a_review_session_survives_a_refusal(web: Web) -> None:
    async with web.client(answers_per_minute=2) as c:
        for _ in range(3):  # refused as unreadable: never counted against the rate
            r = await c.post("/questions/mc-half-dtype", data={"choice": ["9"]})
            assert r.status_code == 400
        form = {"output": "torch.float32", "submit_id": "first-form"}
        for _ in range(3):  # one form sent three times (a double click, a reload): one answer
            r = await c.post("/questions/po-linear-dtype", data=form)
            assert r.status_code == 303
        r = await c.post("/questions/po-linear-dtype", data={"output": "torch.float32"})
        assert r.status_code == 200  # the second answer taken: practice, its key shown by the first
        r = await c.post("/questions/po-linear-dtype", data={**form, "review": "1700000000"})
        assert r.status_code == 303  # past the rate, yet the first form again: where it went
        r = await c.post(
            "/questions/po-linear-dtype", data={"output": "torch.float64", "review": "1700000000"}
        )
        assert r.status_code == 429
        assert (
            'name="review" value="1700000000"' in r.text
        )  # the refused form is still the session's


@pytest.mark.anyio
async def test_an_api_retry_of_a_stored_answer_gets_it_back_past_the_rate(web: Web) -> None:
    async with web.client(answers_per_minute=1) as c:
        sent = {"output": "x", "submit_id": "lost-response"}
        url = "/api/questions/po-linear-dtype/attempts"
        first = await c.post(url, json=sent, params={"run": "false"})
        again = await c.post(url, json=sent, params={"run": "false"})
        assert first.status_code == again.status_code == 200
        assert again.json()["attempt_id"] == first.json()["attempt_id"]
        other = await c.post(url, json={"output": "y"}, params={"run": "false"})
        assert other.status_code == 429


def test_give_back_returns_a_token_never_past_the_limit() -> None:
    clock = Clock()
    rate = AnswerRate(per_learner=1, per_address=0, clock=clock)
    rate.take("ann", "a")
    rate.give_back("ann", "a")
    rate.take("ann", "a")
    with pytest.raises(TooManyAnswers):
        rate.take("ann", "a")
    rate.give_back("ann", "a")
    rate.give_back("ann", "a")
    rate.take("ann", "a")
    with pytest.raises(TooManyAnswers):
        rate.take("ann", "a")
