"""The real models for tests, loaded once per test process (the code under test gets them
passed in; this is the tests' composition root)."""

from __future__ import annotations

import functools

from streams.core.monitors import Semantics
from streams.embeddings.models import Models, load_models


@functools.cache
def models() -> Models:
    return load_models()


@functools.cache
def semantics() -> Semantics:
    return models().semantics()
