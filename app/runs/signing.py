"""Who may speak on the workers' NATS subjects: an HMAC with a key the web and the workers share.

Anyone who can publish on the NATS server could otherwise forge a result for someone else's run,
push a run that makes a worker reply to any subject, or announce a worker that does not exist.
So every run request, result and announcement carries an `Ampquiz-Signature` header: HMAC-SHA256
with `AMPQUIZ_WORKERS_KEY` over the message's kind, the facts it is about (run id, reply subject,
deadline) and its body. A message whose signature is missing or wrong is dropped, deny by
default; the key never crosses the wire. So is one whose headers are not canonical (`canonical`):
a name repeated, or one the message does not carry, which the signature does not cover and which
the server may act on. Restricting who may publish where on the NATS server (deploy/nats.conf,
docs/scaling-out.md) is defence in depth on top of this, not instead of it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Collection
from typing import Any

from app.runs.jetstream import ANNOUNCEMENT_FRESH_S, SIGNATURE_HEADER, STATUS_HEADERS
from app.settings import MIN_WORKERS_KEY_CHARS

__all__ = ["SIGNATURE_HEADER", "Signer", "canonical"]  # SIGNATURE_HEADER: as the tests know it

log = logging.getLogger("ampquiz.runs")


class Signer:
    """Signs and checks the messages between the web and the workers with the shared key."""

    def __init__(self, key: str) -> None:
        if (
            len(key) < MIN_WORKERS_KEY_CHARS
        ):  # Settings says so at start-up; this is for code that skips it
            raise ValueError(
                f"AMPQUIZ_WORKERS_KEY must have at least {MIN_WORKERS_KEY_CHARS} characters"
            )
        self._key = key.encode()
        self.forgeries = 0
        """Messages dropped for a missing or wrong signature, since this process started."""

    def sign(self, kind: str, *facts: str, body: bytes) -> str:
        # Each fact is length-prefixed, so no two different lists of facts sign the same bytes.
        mac = hmac.new(self._key, kind.encode(), hashlib.sha256)
        for fact in facts:
            raw = fact.encode()
            mac.update(len(raw).to_bytes(4, "big") + raw)
        mac.update(body)
        return mac.hexdigest()

    def verify(
        self,
        headers: dict[str, str] | None,
        kind: str,
        *facts: str,
        body: bytes,
        names: Collection[str],
    ) -> bool:
        """Whether the message carries exactly the headers `names`, each once, and the right
        signature; a forgery is counted and logged (the first, then the tenth, hundredth...: a
        flood of forgeries does not flood the log)."""
        claimed = (headers or {}).get(SIGNATURE_HEADER, "")
        if not canonical(headers, names):
            why = "headers are not the ones it carries, each once"
        elif hmac.compare_digest(claimed.encode(), self.sign(kind, *facts, body=body).encode()):
            return True
        else:
            why = "signature is " + ("wrong" if claimed else "missing")
        self.forgeries += 1
        if self.forgeries in (1, 10, 100, 1000) or self.forgeries % 10_000 == 0:
            log.warning("dropped a %s whose %s (%d forged or mis-keyed messages so far): "
                        "is AMPQUIZ_WORKERS_KEY the same on the web and every worker?",
                        kind, why, self.forgeries)  # fmt: skip
        return False


def canonical(headers: dict[str, str] | None, names: Collection[str]) -> bool:
    """`headers` are exactly `names`, none repeated (`app.runs.jetstream.Headers`): what the
    signature covers is then what the server and every client read."""
    return (
        headers is not None
        and not getattr(headers, "repeated", False)
        and len(headers) == len(names)
        and set(headers) == set(names)
    )


def signed_with_another_key(signer: Signer, body: bytes, headers: dict[str, str] | None) -> bool:
    """A status carrying a signature this key does not verify: workers started with another key
    (or anyone else signing). Counted, so that "no worker is online" can say why it may seem so."""
    return bool(headers and headers.get(SIGNATURE_HEADER)) and not signer.verify(
        headers, "status", body=body, names=STATUS_HEADERS
    )


def nobody_online(url: str, other_key: int) -> str:
    """What to say when no worker believed is online at `url`, `other_key` answers having come
    signed with another key (a web, `verify --remote` or `ampquiz workers` given the wrong key)."""
    said = f"no worker is online at {url}"
    if other_key:
        said += (f" ({other_key} answered, signed with a key other than this AMPQUIZ_WORKERS_KEY: is it "
                 "the key the workers were started with?)")  # fmt: skip
    return said


def announcement(signer: Signer, status: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """A worker's status as it goes on the wire: stamped with when it was sent, and signed."""
    body = json.dumps({**status, "sent": time.time()}).encode()
    return body, {SIGNATURE_HEADER: signer.sign("status", body=body)}


def read_announcement(
    signer: Signer, body: bytes, headers: dict[str, str] | None
) -> dict[str, Any] | None:
    """A worker's status, or None when it is not signed with the key, not a worker's status, or
    too old to believe (a replay)."""
    if not signer.verify(headers, "status", body=body, names=STATUS_HEADERS):
        return None
    try:
        status = json.loads(body)
    except ValueError:
        return None
    if not isinstance(status, dict) or not isinstance(status.get("id"), str):
        return None
    sent = status.get("sent")
    if not isinstance(sent, int | float) or abs(time.time() - sent) > ANNOUNCEMENT_FRESH_S:
        return None
    return status
