"""`app.verify.question_runs.QuestionRuns`: each question's run, shared by every learner."""

from __future__ import annotations

from typing import Any

import pytest

from app.bank.load import LoadedQuestion
from app.bank.schema import PredictOutputQuestion
from app.verify.question_runs import QuestionRuns
from sandbox import RunResult

pytestmark = pytest.mark.anyio


class Queue:
    """A run queue that counts the runs asked of it and answers each with `status`."""

    def __init__(self, status: str) -> None:
        self.status = status
        self.runs = 0
        self.environment: dict[str, Any] = {"device_kind": "cpu", "torch_version": "2.13.0"}
        self.has_idle_worker = True

    async def run(self, code: str, **_: Any) -> RunResult:
        self.runs += 1
        return RunResult(status=self.status, stdout="1\n" if self.status == "ok" else "")


def question() -> LoadedQuestion:
    q = PredictOutputQuestion(id="q", topic="t", difficulty=1, prompt="p", explanation="e", source="s",
                              kind="predict_output", code="print(1)", answer="1")  # fmt: skip
    return LoadedQuestion(question=q, set_id="s", path="s.yaml", line=1)


async def test_a_run_that_ended_early_is_handed_out_again_for_a_while_not_made_anew() -> None:
    """An answer waits for the question's run before it is graded, and its result page shows it:
    code slower than the learners' wall time made each answer wait for two timeouts in a row."""
    queue = Queue("timeout")
    runs = QuestionRuns(queue)  # type: ignore[arg-type]
    first = await runs.run(question())
    again = await runs.run(question())
    assert first.status == again.status == "timeout" and queue.runs == 1
    runs._ended_early = {
        key: (when - 31, run) for key, (when, run) in runs._ended_early.items()
    }  # 31 s on
    await runs.run(question())
    assert queue.runs == 2  # then made anew: a timeout may be the moment's


async def test_a_finished_run_is_kept() -> None:
    queue = Queue("ok")
    runs = QuestionRuns(queue)  # type: ignore[arg-type]
    for _ in range(3):
        assert (await runs.run(question())).stdout == "1\n"
    assert queue.runs == 1
