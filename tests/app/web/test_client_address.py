"""Whose address a request counts against: whoever connected, unless the settings name the proxy
in front (`AMPQUIZ_TRUSTED_PROXIES`). A real `ampquiz serve`, as a deployment runs it."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.server import Server


def answers(server: Server, forwarded_for: list[str]) -> list[int]:
    """One answer per address named, each from a new learner (a fresh cookie)."""
    statuses = []
    for address in forwarded_for:
        with httpx.Client(
            base_url=server.url, timeout=30, headers={"X-Forwarded-For": address}
        ) as c:
            r = c.post(
                "/api/questions/linear-dtype-under-autocast/attempts",
                params={"run": "false"},
                json={"output": "a guess"},
            )
            statuses.append(r.status_code)
    return statuses


def test_a_client_cannot_pick_the_address_its_answers_count_against(tmp_path: Path) -> None:
    """uvicorn believed X-Forwarded-For from 127.0.0.1 by default: behind a proxy on this host that
    passed the header on, every client named an address of its own choosing and escaped the
    per-address shares (an attacker's review: 18 runs admitted of 20 where 8 should be)."""
    server = Server(tmp_path)
    server.env["AMPQUIZ_ANSWERS_PER_MINUTE_PER_ADDRESS"] = "2"
    server.start()
    try:
        assert answers(server, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) == [200, 200, 429]
    finally:
        server.stop()


def test_a_trusted_proxy_names_the_client(tmp_path: Path) -> None:
    server = Server(tmp_path)
    server.env.update(
        AMPQUIZ_ANSWERS_PER_MINUTE_PER_ADDRESS="2", AMPQUIZ_TRUSTED_PROXIES="127.0.0.1"
    )
    server.start()
    try:
        assert answers(server, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) == [200, 200, 200]
        # The proxy appends what it saw: a client's own header in front of it changes nothing
        # (10.0.0.1's second answer, then past its two).
        assert answers(server, ["6.6.6.6, 10.0.0.1", "7.7.7.7, 10.0.0.1"]) == [200, 429]
    finally:
        server.stop()
