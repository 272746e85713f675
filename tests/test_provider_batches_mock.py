"""`backend="provider"` over real HTTP against the mock server's batch APIs, every wire format.

The mock's batch clock is the test's `VirtualClock` (its wall reading), so a batch that runs a
minute of batch time ends after a few polls that take no real time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mock_support import positions_sent

import nbagent
from nbagent import RetryPolicy
from nbagent._core._clock import VirtualClock
from nbagent.mock import MockServer

pytestmark = pytest.mark.e2e

PROMPTS = ["one", "two", "three", "four", "five", "six"]
MODELS = {
    "anthropic": ("anthropic:claude-sonnet-4-0", ""),
    "openai": ("openai:gpt-4o-mini", "/v1"),
    "azure": ("azure:my-batch-deployment", ""),
    "gemini": ("gemini:gemini-2.5-flash", ""),
}


def batch_map(mock: MockServer, clock: VirtualClock, model: str, path: Path, **kw: Any) -> Any:
    name, suffix = MODELS[model]
    kw.setdefault("retry", RetryPolicy(max_attempts=3, initial_delay=30, seed=3))
    return nbagent.map(
        PROMPTS,
        model=name,
        backend="provider",
        base_url=mock.url + suffix,
        api_key="sk-test-not-a-key",
        show=False,
        clock=clock,
        poll=(10.0, 30.0),
        state=path / f"{model}.batch",
        **kw,
    )


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(wall_start=time.time())


@pytest.fixture
def mock(clock: VirtualClock) -> Any:
    with MockServer(batch_clock=clock.wall, batch_duration_s=60.0) as server:
        yield server


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_provider_errored_items_classified_and_retryable_ones_resubmitted(
    mock: MockServer, clock: VirtualClock, tmp_path: Path, model: str
) -> None:
    mock.set_faults(["ok", "invalid", "529", "ok", "quota", "500"])
    out = batch_map(mock, clock, model, tmp_path)
    r = out.results
    assert r["error"].tolist()[1] == "BadRequest"
    # out of credit; Gemini's item says only "exceeded your current quota", which live is a
    # per-minute limit as often as not: retried there, as a live 429 without details is
    quota_retried = model == "gemini"
    assert r["error"][4] is pd.NA if quota_retried else r["error"][4] == "QuotaExceeded"
    ok = [0, 2, 3, 5]  # the overloaded and the server error were sent again, and answered
    assert r["error"][ok].isna().all() and r["final_text"][ok].str.len().gt(0).all()
    assert set(mock.submitted_ids().values()) == {1}  # every custom id sent once
    twice = [2, 4, 5] if quota_retried else [2, 5]
    assert positions_sent(mock) == {i: 2 if i in twice else 1 for i in range(6)}
    a = out.attempts
    assert a.groupby("prompt_index").size().tolist() == [2 if i in twice else 1 for i in range(6)]
    assert a["batch_id"].notna().all() and a["batch_id"].nunique() == 2
    assert (a["status_code"][a["outcome"] == "ok"] == 200).all()


def test_results_matched_by_custom_id_whatever_their_order(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    out = batch_map(mock, clock, "openai", tmp_path)
    for prompt, text in zip(PROMPTS, out.results["final_text"], strict=True):
        assert f"“{prompt}”" in text  # the demo model quotes the prompt it answers


def test_a_lost_create_is_adopted_and_the_mock_holds_one_batch(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    for model in ("anthropic", "openai", "gemini"):
        mock.set_faults(["create:lost"])
        out = batch_map(mock, clock, model, tmp_path)
        assert out.results["error"].isna().all(), model
        counts = mock.batch_counts
        key = model
        assert counts.create_requests[key] == 1 and counts.batches_created[key] == 1, model


def test_a_429_on_create_and_a_cut_download_are_retried(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    mock.set_faults(["create:429", "results:cut"])
    out = batch_map(mock, clock, "anthropic", tmp_path)
    assert out.results["error"].isna().all()
    assert mock.batch_counts.create_requests["anthropic"] == 2
    assert mock.batch_counts.batches_created["anthropic"] == 1


def test_expiry_keeps_the_output_file_and_resubmits_the_error_files_lines(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    mock.expire_after_s = 40.0  # past validating, with part of the items ended
    out = batch_map(mock, clock, "openai", tmp_path)
    a = out.attempts
    first = a[a["attempt"] == 1]
    expired = first[first["outcome"] == "error"]
    assert len(expired) >= 1 and set(expired["action"]) == {"retry"}
    assert expired["message"].str.contains("expired").all()
    kept = set(first[first["outcome"] == "ok"]["prompt_index"])
    assert kept, "some items ended before the expiry and kept their answers"
    sent = positions_sent(mock)
    assert all(sent[p] == 1 for p in kept)  # answered work is never sent again
    assert all(sent[p] >= 2 for p in expired["prompt_index"])
    ok = out.results["error"].isna()
    assert set(out.results.index[ok]) >= kept


def test_a_provider_without_a_batch_api_is_one_sentence() -> None:
    with pytest.raises(nbagent.ConfigError, match="has no batch API"):
        nbagent.map(["hi"], model="ollama:llama3.2", backend="provider", show=False)


def test_dry_run_sends_nothing_and_prices_live_and_batch(mock: MockServer, tmp_path: Path) -> None:
    est = nbagent.map(
        ["Summarise this review: great phone", "Summarise this review: bad battery"],
        model="openai:gpt-4o-mini",
        backend="provider",
        base_url=mock.url + "/v1",
        max_tokens=200,
        dry_run=True,
    )
    assert isinstance(est, nbagent.BatchEstimate)
    assert mock.batch_counts.create_requests.get("openai", 0) == 0 and not mock.requests
    assert est.rows["max_output_tokens"].tolist() == [200, 200]
    assert est.cost_batch_usd == pytest.approx(est.cost_live_usd / 2)
    assert est.input_tokens == int(est.rows["input_tokens"].sum()) > 0
    assert "nothing was sent" in est.summary()


def test_a_subscriber_and_instrument_see_every_item_of_a_provider_batch(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from nbagent import events as ev

    mock.set_faults(["ok", "invalid", "529", "ok", "ok", "500"])
    seen: list[ev.Event] = []
    exporter = InMemorySpanExporter()
    spans = TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    stop = ev.subscribe_everywhere(seen.append)
    try:
        with nbagent.instrument(spans):
            out = batch_map(mock, clock, "anthropic", tmp_path)
    finally:
        stop()
        spans.shutdown()
    a = out.attempts
    started = [e for e in seen if isinstance(e, ev.RunStarted)]
    finished = [e for e in seen if isinstance(e, ev.RunFinished)]
    assert sorted(e.run_id for e in started) == sorted(out.results["run_id"])
    assert sorted(e.run_id for e in finished) == sorted(out.results["run_id"])
    ended = [e for e in seen if isinstance(e, (ev.AttemptSucceeded, ev.AttemptFailed))]
    assert len(ended) == len(a)  # one per item per submission, as the attempt log has
    by_row = {(e.run_id, e.submission): e for e in ended}
    for row in a.itertuples():
        e = by_row[(row.run_id, row.attempt)]
        assert e.batch_id == row.batch_id
        assert isinstance(e, ev.AttemptSucceeded) == (row.outcome == "ok")
    retried = [e for e in ended if isinstance(e, ev.AttemptFailed) and e.action == "retry"]
    assert {e.error for e in retried} == {"Overloaded", "ServerError"}
    failed = {e.run_id: e.error for e in finished if e.error}
    assert list(failed.values()) == ["BadRequest"]
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("invoke_agent") == len(PROMPTS)  # a run span for every item
    assert sum(n.startswith("chat") for n in names) == len(a)  # an attempt span per row
