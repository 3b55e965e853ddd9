"""What crosses to a worker and back is checked: a request's limits, a result's shape."""

from __future__ import annotations

import json

import pytest

from app.runs.messages import BadMessage, RunRequest, encode_result, result_from_claim
from sandbox import Limits, RunResult


def request(**limits: object) -> bytes:
    return json.dumps({"id": "r1", "code": "print(1)", "limits": limits}).encode()


def test_a_request_round_trips() -> None:
    sent = RunRequest(
        "r1",
        "print(1)",
        Limits(wall_s=3, cpu_s=3, disk_bytes_per_s=32 << 20),
        explain=True,
        device="cuda",
    )
    assert RunRequest.decode(sent.encode()) == sent


@pytest.mark.parametrize(
    "limits",
    [{"wall_s": 1e9}, {"memory_bytes": 1 << 40}, {"processes": 0}, {"cpu_s": -1}, {"wall_s": "10"},
     {"wall_s": True}, {"uid": 0},
     # A disk cap of a byte a second would have held every page the run touched locked for its
     # whole wall time, for the host too: the disk caps have a floor.
     {"disk_bytes_per_s": 1}, {"disk_ios_per_s": 10}, {"disk_bytes_per_s": 1 << 40}],
)  # fmt: skip
def test_a_request_may_not_ask_for_more_than_a_worker_gives(limits: dict) -> None:
    with pytest.raises(BadMessage, match="limit"):
        RunRequest.decode(request(**limits))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"id": "", "code": "x"}).encode(), "'id'"),
        (json.dumps({"id": "r", "code": 1}).encode(), "'code'"),
        (json.dumps({"id": "r", "code": "x", "device": "tpu"}).encode(), "'device'"),
    ],
)
def test_a_malformed_request_is_refused_saying_why(raw: bytes, says: str) -> None:
    with pytest.raises(BadMessage, match=says):
        RunRequest.decode(raw)


def test_a_result_round_trips_and_an_oversized_explanation_is_dropped_not_the_run() -> None:
    result = RunResult(status="ok", stdout="hi\n", explanation={"ops": ["x" * 2_000_000]})
    back = result_from_claim(encode_result(result))
    assert (back.status, back.stdout, back.explanation) == ("ok", "hi\n", None)
    assert "too large to send" in back.message


@pytest.mark.parametrize(
    "claim",
    [
        {"status": "pwned"},
        {"status": "ok", "stdout": 3},
        {"status": "ok", "duration_ms": float("nan")},
        {"status": "ok", "exception": {"type": "X"}},
        {"status": "ok", "warnings": [{"category": "W"}]},
        {"status": "ok", "environment": {"device_kind": {"nested": 1}}},
        {"status": "ok", "explanation": ["not", "an", "object"]},
    ],
)
def test_a_result_is_a_claim_checked_before_use(claim: dict) -> None:
    with pytest.raises(BadMessage):
        result_from_claim(claim)
