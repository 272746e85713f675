"""`nbagent.batch.map`: one agent per prompt under the shared limiter, one results frame."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pandas as pd
import pytest

from nbagent import ConfigError
from nbagent._loop._limiter import reset_shared_limiters
from nbagent.batch import RESULT_COLUMNS, BatchProgress, BatchResult, amap, map
from nbagent.mock import RateLimit, serve

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Iterator[None]:
    reset_shared_limiters()
    yield
    reset_shared_limiters()


def test_map_over_a_list_against_a_rate_limited_server() -> None:
    prompts = [f"What is {i} * 7?" for i in range(10)]
    with serve(rate_limit=RateLimit(requests_per_s=40, burst=2)) as server:
        out = map(prompts, model="demo", base_url=server.url, concurrency=4, show=False)
        statuses = [r.status for r in server.requests]
    assert isinstance(out, BatchResult)
    df = out.results
    assert list(df.columns) == list(RESULT_COLUMNS)
    assert df["prompt"].tolist() == prompts  # prompt order, whatever the finishing order
    assert df["error"].isna().all()
    assert (df["end_reason"] == "end_turn").all()
    assert df["final_text"].str.len().gt(0).all()
    assert (df["input_tokens"] > 0).all() and (df["turns"] >= 1).all()
    assert set(out.attempts["run_id"]) >= set(df["run_id"])
    assert sorted(set(out.attempts["prompt_index"])) == list(range(10))
    assert statuses.count(200) >= 10
    assert len(out) == 10 and "10/10 prompts ok" in repr(out)
    assert "<table" in out._repr_html_()


def test_map_over_a_dataframe_column_keeps_the_index() -> None:
    frame = pd.DataFrame(
        {"id": [1, 2, 3], "question": ["Say hi.", "What is 2 + 2?", "Say bye."]},
        index=["a", "b", "c"],
    )
    with serve() as server:
        out = map(frame, column="question", base_url=server.url, show=False)
    assert out.results.index.tolist() == ["a", "b", "c"]
    assert out.results["prompt"].tolist() == frame["question"].tolist()
    joined = frame.join(out.results[["final_text"]])
    assert joined["final_text"].notna().all()
    with pytest.raises(ConfigError, match="column"):
        map(frame, show=False)


def test_a_prompt_that_fails_hard_does_not_stop_the_others() -> None:
    with serve(faults=["ok", "401", "ok"]) as server:
        out = map(
            ["one", "two", "three"],
            base_url=server.url,
            api_key="sk-very-secret-key",
            concurrency=1,
            show=False,
        )
    df = out.results
    assert df["error"].tolist()[1] == "AuthFailed"
    assert df["end_reason"].tolist() == ["end_turn", "error", "end_turn"]
    assert df["error_message"].notna().tolist() == [False, True, False]
    assert df["final_text"].isna().tolist() == [False, True, False]
    assert len(out.ok) == 2 and len(out.failed) == 1
    text = df.to_csv() + out.attempts.to_csv() + repr(out) + out.limiter
    assert "sk-very-secret-key" not in text


def test_amap_in_a_running_loop_and_progress_counts() -> None:
    seen: list[tuple[int, int]] = []

    async def main(url: str) -> BatchResult:
        return await amap(["a", "b"], base_url=url, show=False, subscribers=[_count(seen)])

    with serve(faults=["503", "ok", "ok"]) as server:
        out = asyncio.run(main(server.url))
    assert out.results["error"].isna().all()
    assert int((out.attempts["action"] == "retry").sum()) == 1
    assert seen  # extra subscribers see every agent's events


def _count(seen: list[tuple[int, int]]) -> BatchProgress:
    progress = BatchProgress(total=2)
    progress.on_change = lambda p, final: seen.append((p.done, p.retries))
    return progress


def test_bad_arguments_fail_before_anything_is_sent() -> None:
    with pytest.raises(ConfigError):
        map(["x"], model="nonsense:model", show=False)
    with pytest.raises(ConfigError, match="concurrency"):
        map(["x"], concurrency=0, show=False)
    with pytest.raises(ConfigError, match="many prompts"):
        map("one prompt", show=False)
    with serve() as server:  # (not the process-wide demo server: it would outlive the test)
        assert len(map([], base_url=server.url, show=False)) == 0


@pytest.mark.parametrize("backend", ["local", "provider"])
def test_missing_and_empty_prompts_are_named_before_anything_is_sent(backend: str) -> None:
    import numpy as np

    column = pd.Series(["a", np.nan, "", None, "b"], index=[10, 11, 12, 13, 14])
    with serve() as server:
        with pytest.raises(ConfigError) as caught:
            map(column, base_url=server.url, show=False, backend=backend)
        assert server.requests == []  # nothing sent, not even the first good prompt
    # pandas 3 keeps the None as NaN (its string dtype), pandas 2 as None: named as it is held
    held = "None" if column[13] is None else "NaN"
    assert str(caught.value) == (
        'map(): 3 of 5 prompts are missing or empty, at indices 11 (NaN), 12 (""), '
        f"13 ({held}); drop or fill them first "
        '(series.dropna(), series[series.str.strip() != ""])'
    )
    with pytest.raises(ConfigError, match=r"1 of 3 prompts is missing or empty, at position 2 "):
        map(["a", "b", "   "], show=False, dry_run=True)
    with pytest.raises(ConfigError, match=r"at position 0 \(None\); drop or fill it first$"):
        map([None, "b"], show=False)


@pytest.mark.parametrize("backend", ["local", "provider"])
def test_an_output_mode_without_output_is_refused_not_ignored(backend: str) -> None:
    with serve() as server:
        with pytest.raises(ConfigError) as caught:
            map(["a"], base_url=server.url, show=False, backend=backend, output_mode="prompted")
        assert server.requests == []
    assert str(caught.value) == (
        "output_mode='prompted' says how a structured answer is asked for, but output= is not "
        "given: pass output=YourModel too, or leave output_mode out"
    )
