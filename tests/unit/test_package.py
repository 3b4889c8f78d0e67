from __future__ import annotations

import importlib

import streams


def test_every_public_name_resolves_to_the_object_of_its_module() -> None:
    for name in streams.__all__:
        obj = getattr(streams, name)
        if name != "__version__":
            assert obj is getattr(importlib.import_module(streams._EXPORTS[name]), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        streams.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
