"""`nbagent.batch._options`: the three batch entry points take the same options, checked once."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import pytest

from nbagent import ConfigError
from nbagent.batch import amap, map, start
from nbagent.batch._options import BatchOptions


def _params(fn: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_map_amap_and_start_have_one_signature_and_it_is_the_options() -> None:
    assert _params(map) == _params(amap) == _params(start)
    fields = [f.name for f in dataclasses.fields(BatchOptions)]
    assert [name for name, _, _ in _params(map)] == fields


def test_an_entry_point_and_the_options_cannot_drift_apart() -> None:
    call = {f.name: None for f in dataclasses.fields(BatchOptions)}
    call.pop("workers")
    with pytest.raises(TypeError, match="workers"):
        BatchOptions.of(call)


@pytest.mark.parametrize(
    ("kwargs", "sentence"),
    [
        ({"concurrency": 0}, "concurrency must be a positive whole number, not 0"),
        ({"concurrency": True}, "concurrency must be a positive whole number, not True"),
        ({"backend": "spark"}, "backend= takes 'local' or 'ray', not 'spark'"),
        ({"workers": 0, "backend": "ray"}, "workers must be a positive whole number, not 0"),
        ({"workers": 2}, "workers= is for backend='ray'"),
    ],
)
def test_each_entry_point_refuses_a_bad_option_with_the_same_sentence(
    kwargs: dict[str, object], sentence: str
) -> None:
    with pytest.raises(ConfigError, match=sentence.replace("(", r"\(")):
        map(["hi"], show=False, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=sentence.replace("(", r"\(")):
        asyncio.run(amap(["hi"], show=False, **kwargs))  # type: ignore[arg-type]

    async def started() -> None:
        start(["hi"], show=False, **kwargs)  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match=sentence.replace("(", r"\(")):
        asyncio.run(started())


def test_start_outside_a_running_loop_says_so_before_showing_anything() -> None:
    with pytest.raises(RuntimeError, match="no running event loop"):
        start(["hi"], show=False)
