"""The built-in monitor suite (SPEC section 6). Adding a monitor: a module that defines
`MONITOR = Monitor(...)` (see base.py) and one line in DEFAULT_MONITORS. Its order is the order
of a decision's monitor scores and breaks ties between monitors that fire equally strongly.
"""

from __future__ import annotations

from typing import Any

from . import compression, contradiction, data_instruction, drift, loop, sprawl, verification
from .base import Monitor

DEFAULT_MONITORS: tuple[Monitor[Any], ...] = (
    contradiction.MONITOR,
    loop.MONITOR,
    verification.MONITOR,
    compression.MONITOR,
    sprawl.MONITOR,
    drift.MONITOR,
    data_instruction.MONITOR,
)
MONITORS = tuple(m.name for m in DEFAULT_MONITORS)
FAILURE_TYPES = {m.name: m.failure_type for m in DEFAULT_MONITORS}
