"""Vector helpers shared by the embedders and their tests."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


def l2_normalise(x: FloatArray) -> FloatArray:
    """Row-wise L2 normalisation; zero rows stay zero (no division by zero, no NaN)."""
    if x.dtype == np.float32:
        # What `np.linalg.norm(x, axis=-1, keepdims=True)` computes for float32 rows (the
        # same products, the same reduction), without its ~4 us of argument handling.
        norms = np.sqrt(np.add.reduce(x * x, axis=-1, keepdims=True))
    else:
        norms = np.linalg.norm(x, axis=-1, keepdims=True)
    out: FloatArray = (x / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def cosine(a: FloatArray, b: FloatArray) -> float:
    """Cosine of two normalised vectors, clipped to [-1, 1]; 0.0 if either is a zero vector."""
    return float(np.clip(np.dot(a, b), -1.0, 1.0))


def cosine_matrix(a: FloatArray, b: FloatArray) -> FloatArray:
    """All pairwise cosines of normalised rows: (len(a), len(b)), clipped to [-1, 1]."""
    out: FloatArray = np.clip(a @ b.T, -1.0, 1.0).astype(np.float32, copy=False)
    return out
