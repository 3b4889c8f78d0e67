"""Decision signatures: who wrote a steering record, checked by the agent before it steers.

Any principal that can write the steering topic can otherwise put words in every agent's
prompt, route its calls to a model of its choice or stop it. With `RB_DECISION_KEY` set the
worker signs each decision (HMAC-SHA256 over the run id, which is the record's key, and the
decision's bytes) and the client drops records whose signature is missing or wrong.

The signature travels in a Kafka record header (`rb-sig`), never in the decision: the decision
bytes stay exactly what `rb-streams replay` produces. Standard library only: a client-only
install imports it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

SIGNATURE_HEADER = "rb-sig"
_DOMAIN = b"rb.decision.v1\x00"  # a decision MAC can never pass for another record's


def sign(key: str, run_id: bytes, value: bytes) -> bytes:
    """The hex HMAC-SHA256 of (run id, decision bytes) under `key`; the run id is
    length-prefixed so no split of one byte string into two can collide with another."""
    msg = _DOMAIN + len(run_id).to_bytes(4, "big") + run_id + value
    return hmac.new(key.encode("utf-8"), msg, hashlib.sha256).hexdigest().encode("ascii")


def signature_of(headers: Iterable[tuple[str, bytes | None]] | None) -> bytes | None:
    """The record's `rb-sig` header value (the first one), or None."""
    for name, value in headers or ():
        if name == SIGNATURE_HEADER:
            return value if isinstance(value, bytes) else None
    return None


def verify(key: str, run_id: bytes | None, value: bytes, signature: bytes | None) -> bool:
    """Whether `signature` is `key`'s signature of this record (constant-time compare)."""
    if not isinstance(signature, bytes) or run_id is None:
        return False
    return hmac.compare_digest(signature, sign(key, run_id, value))
