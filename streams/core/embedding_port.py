"""The embedding port: text in, unit vectors out. The one protocol every embedder implements.

It lives in the core because the monitors depend on it; the models behind it (MiniLM, the
static model, the vector cache in front of them) are adapters in `streams.embeddings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """A sentence embedder: `embed` returns (len(texts), dim) float32 rows, each L2-normalised
    (or all zeros when a text has no usable token)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vector: ...
