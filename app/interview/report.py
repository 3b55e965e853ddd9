"""What an interview's log adds up to: where the candidate is (`progress`) and the report at the
end (`report`): per question the prediction against the truth, the confidence, the runs, the
time and the interviewer's notes; and calibration, how well confidence matched correctness."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.interview.model import CONFIDENCES, Event, Interview


@dataclass
class QuestionLog:
    id: str
    opened_at: datetime | None = None
    left_at: datetime | None = None
    prediction: dict[str, Any] | None = None
    """The `predicted` event's data: answer, confidence, correct, truth."""
    runs: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def seconds(self, now: datetime) -> float | None:
        if self.opened_at is None:
            return None
        return round(((self.left_at or now) - self.opened_at).total_seconds(), 1)


@dataclass
class Progress:
    questions: list[QuestionLog]
    position: int
    """The index of the question the candidate is on; == len(questions) once finished."""
    started_at: datetime | None
    extra_s: int

    @property
    def finished(self) -> bool:
        return self.position >= len(self.questions)

    @property
    def current(self) -> QuestionLog | None:
        return None if self.finished else self.questions[self.position]

    def deadline(self, interview: Interview) -> datetime | None:
        if interview.minutes is None or self.started_at is None:
            return None
        return self.started_at + timedelta(minutes=interview.minutes, seconds=self.extra_s)


def progress(interview: Interview, events: list[Event]) -> Progress:
    logs = [QuestionLog(qid) for qid in interview.question_ids]
    by_id = {q.id: q for q in logs}
    position, started, extra = 0, None, 0
    for e in events:
        q = by_id.get(str(e.data.get("question", "")))
        if e.kind == "opened" and q is not None:
            started = started or e.at
            q.opened_at = q.opened_at or e.at
        elif e.kind == "predicted" and q is not None and q.prediction is None:
            q.prediction = e.data
        elif e.kind == "run" and q is not None:
            q.runs.append(e.data)
        elif e.kind == "note" and q is not None:
            q.note = str(e.data.get("text", ""))
        elif e.kind == "extended":
            extra += int(e.data.get("seconds", 0))
        elif e.kind in ("next", "finished"):
            if position < len(logs):
                logs[position].left_at = e.at
            position = len(logs) if e.kind == "finished" else min(len(logs), position + 1)
    return Progress(logs, position, started, extra)


def calibration(logs: list[QuestionLog]) -> dict[str, Any]:
    """Per stated confidence, how often the candidate was right; and the Brier score (the mean
    squared gap between confidence and outcome: 0 is perfect, 0.25 is always saying 50 %)."""
    predicted = [q.prediction for q in logs if q.prediction is not None]
    rows = []
    for level in CONFIDENCES:
        at = [p for p in predicted if p.get("confidence") == level]
        right = sum(1 for p in at if p.get("correct"))
        rows.append({"confidence": level, "predictions": len(at), "right": right,
                     "right_percent": round(100 * right / len(at)) if at else None})  # fmt: skip
    brier = (
        round(sum((p["confidence"] / 100 - (1.0 if p.get("correct") else 0.0)) ** 2 for p in predicted) / len(predicted), 3)
        if predicted else None
    )  # fmt: skip
    right = sum(1 for p in predicted if p.get("correct"))
    mean_conf = (
        round(sum(p["confidence"] for p in predicted) / len(predicted)) if predicted else None
    )
    return {"rows": rows, "brier": brier, "predictions": len(predicted), "right": right,
            "mean_confidence": mean_conf,
            "right_percent": round(100 * right / len(predicted)) if predicted else None}  # fmt: skip


def report(
    interview: Interview,
    events: list[Event],
    titles: dict[str, str],
    now: datetime,
    keys: dict[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The report as plain data: the JSON export, and what the printable page shows. `keys`:
    each question's kind and key, for those the candidate never predicted (a prediction carries
    the key as it was then)."""
    keys = keys or {}
    done = progress(interview, events)
    questions = []
    for q in done.questions:
        p = q.prediction or {}
        kind, key = keys.get(q.id, (None, None))
        questions.append({
            "id": q.id, "title": titles.get(q.id, q.id),
            "kind": p.get("kind") or kind, "prediction": p.get("answer"),
            "truth": p.get("truth", key), "confidence": p.get("confidence"),
            "correct": p.get("correct"), "authors_word": bool(p.get("authors_word")), "runs": len(q.runs),
            "run_log": [{k: r.get(k) for k in ("status", "diff", "stdout", "error")} for r in q.runs],
            "seconds": q.seconds(now), "notes": q.note,
        })  # fmt: skip
    return {
        "interview": interview.id,
        "created_by": interview.created_by,
        "created_at": interview.created_at.isoformat(),
        "minutes": interview.minutes,
        "extra_seconds": done.extra_s,
        "finished": done.finished,
        "revoked": interview.revoked,
        "questions": questions,
        "calibration": calibration(done.questions),
    }
