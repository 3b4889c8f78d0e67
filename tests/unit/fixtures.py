"""Unit-tier fixtures (listed in tests/conftest.py's `pytest_plugins`)."""

from __future__ import annotations

import pytest

from streams.core.monitors import Semantics
from tests.models import semantics


@pytest.fixture(scope="session")
def sem() -> Semantics:
    """The real embedders (static + MiniLM), loaded once per test session."""
    return semantics()
