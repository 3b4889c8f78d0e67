"""Rendering injections into the one `[REASONBLOCKS]` block the agent appends (SPEC section 9)."""

from __future__ import annotations

from collections.abc import Sequence

from ..shared.contract import REASONBLOCKS_MARKER as MARKER
from .decision import Injection


def render_block(injections: Sequence[Injection]) -> str | None:
    """All injections of a decision, joined with blank lines under the marker line."""
    texts = [i["text"].strip() for i in injections if i.get("text") and i["text"].strip()]
    if not texts:
        return None
    return MARKER + "\n" + "\n\n".join(texts)
