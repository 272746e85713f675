"""The package's face: `nbagent.__all__` is sorted, importable, and is exactly the public names."""

from __future__ import annotations

import types

import nbagent


def test_all_is_sorted_and_importable() -> None:
    assert list(nbagent.__all__) == sorted(nbagent.__all__)
    for name in nbagent.__all__:
        assert hasattr(nbagent, name), name


def test_exported_names_are_the_public_ones() -> None:
    public = {
        name
        for name, value in vars(nbagent).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    # IPython's extension hook must be a module attribute; it is not part of the API
    assert public - {"load_ipython_extension"} == set(nbagent.__all__)


def test_every_error_class_is_exported() -> None:
    from nbagent import errors

    for name in errors.__all__:
        if name not in ("describe",):
            assert name in nbagent.__all__, name
