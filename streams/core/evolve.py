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


@functools.cache
def field_defaults(cls: type) -> tuple[dict[str, Any], dict[str, Callable[[], Any]]]:
    """A dataclass's fields that have a default: (name -> default value) and (name -> default
    factory), in field order."""
    values: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            factories[f.name] = f.default_factory
    return values, factories


_MISSING = object()


def non_default(obj: Any, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The fields of dataclass instance `obj` that differ from their defaults (a field left out
    holds its default exactly: equal and of the same type), as `rebuild` fills them back; the
    fields in `skip` are kept whatever they hold. The compact form of a stored state."""
    cls: type = obj.__class__
    dflt = _defaults_to_compare(cls)
    items = (
        vars(obj).items() if hasattr(obj, "__dict__") else ((n, getattr(obj, n)) for n in _field_order(cls))
    )
    return {
        k: v
        for k, v in items
        if (d := dflt.get(k, _MISSING)) is _MISSING or k in skip or type(v) is not type(d) or v != d
    }


def drop_defaults(cls: type, stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored form of a `cls` instance (a JSON object, as decoded), less the fields that hold
    their defaults: `non_default` of the instance it decodes to."""
    dflt = _defaults_to_compare(cls)
    return {
        k: v
        for k, v in stored.items()
        if (d := dflt.get(k, _MISSING)) is _MISSING or type(v) is not type(d) or v != d
    }


@functools.cache
def _defaults_to_compare(cls: type) -> dict[str, Any]:
    """Each field's default, to compare with (never handed out): the default values, and one
    value of each default factory that makes an empty list or dict (a field whose factory makes
    anything else is always kept)."""
    values, factories = field_defaults(cls)
    out = dict(values)
    for name, make in factories.items():
        v = make()
        if type(v) in (list, dict) and not v:
            out[name] = v
    return out


@functools.cache
def _field_order(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def rebuild(cls: Callable[..., T], stored: Mapping[str, Any]) -> T:
    """`cls(**stored)`, without running `__init__` when `stored` names only fields of a plain
    dataclass, and every field without a default (what the state's own encoding holds: every
    field, or those that differ from their defaults); the others take their defaults, as the
    constructor gives them. Anything else (an unknown key, a required field missing, a class
    with an `__init__` of its own) goes through the constructor, with its defaults and its
    errors."""
    names = plain_fields(cls) if isinstance(cls, type) else None
    if names is None:
        return cls(**stored)
    keys = stored.keys()
    if keys != names:
        if not keys <= names:
            return cls(**stored)
        values, factories = field_defaults(cast("type", cls))
        filled: dict[str, Any] = {}
        for name in _field_order(cast("type", cls)):  # field order, as the constructor sets them
            if name in stored:
                filled[name] = stored[name]
            elif name in values:
                filled[name] = values[name]
            elif name in factories:
                filled[name] = factories[name]()
            else:  # a required field missing: the constructor's error
                return cls(**stored)
        stored = filled
    new = object.__new__(cast("type[T]", cls))
    new.__dict__.update(stored)
    return new
