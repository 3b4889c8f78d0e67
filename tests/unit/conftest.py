from __future__ import annotations

import pytest

from streams.core.monitors import Semantics
from streams.embeddings.embedder import default_semantics


@pytest.fixture(scope="session")
def sem() -> Semantics:
    """The real embedders (static + MiniLM), loaded once per test session."""
    return default_semantics()
