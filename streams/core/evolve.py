"""A frozen dataclass's copy with some fields changed, or decoded from its stored fields, cheaply.

`dataclasses.replace` re-runs `__init__` over every field (18-20 us on the run state and the
verification state, several times per step); copying the instance dict is ~1 us. A frozen
`__init__` pays `object.__setattr__` per field the same way, and the run state and each of its
monitor states are decoded on every step. Field names are still checked, so a typo fails as it
would with `replace` or the constructor."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

T = TypeVar("T")


def evolve(obj: T, names: frozenset[str], changes: dict[str, Any]) -> T:
    """`obj` with `changes` (`names`: its dataclass's field names). No __post_init__ runs."""
    if not names.issuperset(changes):  # no set built on the common path (~10 calls a step)
        raise TypeError(f"{type(obj).__name__} has no field(s) {sorted(changes.keys() - names)}")
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


@functools.cache
def plain_fields(cls: type) -> frozenset[str] | None:
    """The field names of a dataclass whose `__init__` only stores its arguments (no slots, no
    `__post_init__`, no init=False field): one `rebuild` may fill without calling it. None
    otherwise."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__slots__") or hasattr(cls, "__post_init__"):
        return None
    fs = dataclasses.fields(cls)
    if not all(f.init for f in fs):
        return None
    return frozenset(f.name for f in fs)


def rebuild(cls: Callable[..., T], stored: Mapping[str, Any]) -> T:
    """`cls(**stored)`, without running `__init__` when `stored` names every field of a plain
    dataclass (what the state's own encoding always holds). Anything else (a state written
    before a field existed, an unknown key, a class with an `__init__` of its own) goes through
    the constructor, with its defaults and its errors."""
    names = plain_fields(cls) if isinstance(cls, type) else None
    if names is None or stored.keys() != names:
        return cls(**stored)
    new = object.__new__(cast("type[T]", cls))
    new.__dict__.update(stored)
    return new
