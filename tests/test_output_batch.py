"""`nbagent.map(..., output=Schema)`: the results gain the validated answer, its reasks and one
typed column per field, so `df.join(out.results)` gives the user their columns; a failed row
keeps its error and raw text; a field named like a result column is refused before anything
runs; the batch view counts the rows that needed a reask. Locally, and once on Ray."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Iterator
from typing import Any, Literal

import pandas as pd
import pytest
from pydantic import BaseModel, Field
from ray_support import ray_session

from nbagent import ConfigError
from nbagent._loop._limiter import reset_shared_limiters
from nbagent.batch import RESULT_COLUMNS, amap, map, start
from nbagent.mock import serve

pytestmark = pytest.mark.e2e


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)
    summary: str
    tags: list[str] = []


TEXTS = pd.DataFrame(
    {
        "text": [
            "Loved it: a great kettle, fast and quiet.",
            "Broke after a week, terrible. [demo:schema_mismatch]",
            "Tell me something awful. [demo:refusal]",
            "A very long review indeed. [demo:truncated]",
        ]
    },
    index=["a", "b", "c", "d"],
)


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Iterator[None]:
    reset_shared_limiters()
    yield
    reset_shared_limiters()


def check(results: pd.DataFrame) -> None:
    assert list(results.columns) == [
        *RESULT_COLUMNS,
        "output",
        "reasks",
        "sentiment",
        "stars",
        "summary",
        "tags",
    ]
    assert str(results["stars"].dtype) == "Int64" and str(results["sentiment"].dtype) == "string"
    assert str(results["reasks"].dtype) == "Int64" and results["tags"].dtype == object
    ok, reasked, refused, cut = (results.loc[k] for k in "abcd")
    assert isinstance(ok["output"], Review) and ok["sentiment"] == "positive" and ok["stars"] == 5
    assert reasked["reasks"] == 1 and reasked["sentiment"] == "negative"
    assert pd.isna(reasked["error"])
    assert refused["error"] == "ContentFiltered" and pd.isna(refused["stars"])
    assert cut["error"] == "OutputTruncated" and pd.isna(cut["sentiment"])
    assert cut["final_text"].startswith('{"sentiment"')  # the raw text of the cut answer
    assert refused["output"] is None


def test_map_gives_typed_columns_to_join() -> None:
    with serve() as server:
        out = map(TEXTS, column="text", base_url=server.url, output=Review, show=False)
    check(out.results)
    joined = TEXTS.join(out.results[["sentiment", "stars"]])
    assert joined.loc["a", "sentiment"] == "positive" and list(joined.index) == list("abcd")
    assert "1 reasked" in out.summary()
    assert (out.attempts["action"] == "reask").sum() == 1


def test_amap_and_start_take_output_too() -> None:
    async def both() -> tuple[Any, Any]:
        with serve() as server:
            first = await amap(TEXTS["text"], base_url=server.url, output=Review, show=False)
            handle = start(TEXTS["text"], base_url=server.url, output=Review, show=False)
            second = await handle
            assert handle.progress.reasked == 1  # what the batch view counts
            assert handle.progress.snapshot()["reasked"] == 1
            return first, second

    first, second = asyncio.run(both())
    check(first.results)
    check(second.results)


def test_a_field_named_like_a_result_column_is_refused_before_anything_runs() -> None:
    class Clash(BaseModel):
        prompt: str

    with serve() as server:
        with pytest.raises(ConfigError, match="field named 'prompt'"):
            map(["x"], base_url=server.url, output=Clash, show=False)
        assert server.requests == []


def test_a_json_schema_dict_and_a_dataclass_give_their_columns() -> None:
    @dataclasses.dataclass
    class Point:
        x: float
        y: float

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
        "required": ["city", "people"],
    }
    with serve() as server:
        by_dict = map(["Paris"], base_url=server.url, output=schema, show=False).results
        by_class = map(["Origin"], base_url=server.url, output=Point, show=False).results
    assert str(by_dict["people"].dtype) == "Int64" and isinstance(by_dict["output"].iloc[0], dict)
    assert by_class["x"].dtype == "float64" and isinstance(by_class["output"].iloc[0], Point)


@pytest.fixture(scope="module")
def ray() -> Iterator[Any]:
    yield from ray_session(num_cpus=2)


@pytest.mark.slow
def test_on_ray_the_answers_come_back_as_columns(ray: Any) -> None:
    # a notebook's classes live in __main__, which Ray's pickling sends by value; this
    # module's must be sent the same way (the workers cannot import a test module)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with serve() as server:
        out = map(
            TEXTS["text"], base_url=server.url, output=Review, backend="ray", workers=2, show=False
        )
    check(out.results)
