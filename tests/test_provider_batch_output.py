"""`backend="provider"` with `output=`: each item asks for the schema as a live request does, each
answer is checked as a live attempt checks it, an answer off its schema is resubmitted in the
next batch with its errors (the live reask, bounded by `output_retries`), a truncated or refused
answer fails its row at once; the results gain the structured columns; the state file keeps the
schema for a resume. Over real HTTP against the mock's batch APIs, in virtual time."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pytest
from batch_fakes import provider_options
from mock_support import positions_sent
from pydantic import BaseModel, Field

import nbagent
from nbagent import ConfigError, RetryPolicy
from nbagent._core._budget import Usage
from nbagent._core._clock import VirtualClock
from nbagent.analysis import read_attempts
from nbagent.batch import RESULT_COLUMNS
from nbagent.mock import MockServer
from nbagent.providers._pricing import estimate_cost

pytestmark = pytest.mark.e2e


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)
    summary: str


PROMPTS = ["A great kettle.", "Broke in a week.", "Tell me something awful.", "A long one."]
MODELS = {  # a model whose auto mode is native on each wire format
    "anthropic": ("anthropic:claude-sonnet-4-5", ""),
    "openai": ("openai:gpt-4o-mini", "/v1"),
    "gemini": ("gemini:gemini-2.5-flash", ""),
}


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(wall_start=time.time())


@pytest.fixture
def mock(clock: VirtualClock) -> Any:
    with MockServer(batch_clock=clock.wall, batch_duration_s=60.0) as server:
        yield server


def options(mock: MockServer, clock: VirtualClock, provider: str, path: Path) -> dict[str, Any]:
    name, suffix = MODELS[provider]
    return {
        "model": name,
        "backend": "provider",
        "base_url": mock.url + suffix,
        "api_key": "sk-test-not-a-key",
        "show": False,
        "clock": clock,
        "poll": (10.0, 30.0),
        "retry": RetryPolicy(max_attempts=3, initial_delay=30, seed=3),
        "state": path / f"{provider}.batch",
    }


def turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation an item's request carries, as (role, text): any wire format."""
    if "contents" in body:  # Gemini
        return [
            (
                "assistant" if c["role"] == "model" else c["role"],
                " ".join(str(p.get("text", "")) for p in c["parts"]),
            )
            for c in body["contents"]
        ]
    out = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            text = content
        else:
            text = " ".join(
                str(b.get("text") or b.get("input") or b.get("content") or "") for b in content
            )
        out.append((m["role"], text))
    return [t for t in out if t[0] != "system"]


@pytest.mark.parametrize("provider", sorted(MODELS))
def test_ok_reasked_refused_and_truncated_items_on_each_wire_format(
    mock: MockServer, clock: VirtualClock, tmp_path: Path, provider: str
) -> None:
    mock.set_faults(["ok", "schema_mismatch", "refusal", "truncated"])
    out = nbagent.map(PROMPTS, output=Review, **options(mock, clock, provider, tmp_path))

    # two batches: the four items, then the reasked one alone; nothing else sent again
    counts = mock.batch_counts
    assert counts.create_requests[provider] == 2 and counts.batches_created[provider] == 2
    assert counts.items_submitted[provider] == 5
    assert set(mock.submitted_ids().values()) == {1}
    assert positions_sent(mock) == {0: 1, 1: 2, 2: 1, 3: 1}

    r = out.results
    assert list(r.columns) == [*RESULT_COLUMNS, "output", "reasks", "sentiment", "stars", "summary"]
    assert str(r["stars"].dtype) == "Int64" and str(r["sentiment"].dtype) == "string"
    assert isinstance(r["output"][0], Review) and isinstance(r["output"][1], Review)
    assert r["reasks"].tolist() == [0, 1, 0, 0]
    assert r["error"].isna().tolist() == [True, True, False, False]
    assert r["error"][2] == "ContentFiltered" and r["error"][3] == "OutputTruncated"
    assert r["stars"][:2].notna().all() and r["stars"][2:].isna().all()
    assert r["output"][2] is None and r["output"][3] is None
    assert r["final_text"][3].startswith('{"sentiment"')  # the cut answer's raw text
    assert json.loads(r["final_text"][1]) == r["output"][1].model_dump()

    a = out.attempts
    first, second = (b.id for b in mock.batches)
    per = {i: a[a["prompt_index"] == i] for i in range(4)}
    assert [len(per[i]) for i in range(4)] == [1, 2, 1, 1]
    reask, fixed = per[1].iloc[0], per[1].iloc[1]
    assert (reask["action"], reask["error_kind"], reask["outcome"]) == (
        "reask",
        "OutputInvalid",
        "error",
    )
    assert (reask["attempt"], reask["batch_id"]) == (1, first)
    assert (fixed["action"], fixed["attempt"], fixed["batch_id"]) == ("none", 2, second)
    assert (reask["reask"], fixed["reask"]) == (0, 1)  # the first answer, then the first reask
    assert reask["input_tokens"] > 0 and reask["output_tokens"] > 0
    model = MODELS[provider][0].split(":", 1)[1]
    for row in (reask, fixed):  # each submission's own tokens, at the batch price
        usage = Usage(
            input_tokens=int(row["input_tokens"]), output_tokens=int(row["output_tokens"])
        )
        assert row["cost_usd"] == pytest.approx(estimate_cost(provider, model, usage, batch=True))
    assert r["input_tokens"][1] == reask["input_tokens"] + fixed["input_tokens"]
    assert r["cost_usd"][1] == pytest.approx(reask["cost_usd"] + fixed["cost_usd"])
    assert per[2]["action"].tolist() == ["fail"] and per[2]["error_kind"].tolist() == [
        "ContentFiltered"
    ]
    cut = per[3].iloc[0]
    assert (cut["action"], cut["error_kind"]) == ("fail", "OutputTruncated")
    assert cut["output_tokens"] > 0 and cut["cost_usd"] > 0

    # every item asked for the schema; the reask carried the failed answer once and its errors
    bodies = mock.batches[0].requests()
    assert all(
        json.dumps(Review.model_json_schema()["required"]) in json.dumps(b) for b in bodies.values()
    )
    (body,) = mock.batches[1].requests().values()
    conv = turns(body)
    assert [role for role, _ in conv] == ["user", "assistant", "user"]
    assert conv[0][1] == PROMPTS[1]
    assert "unexpected_field" in conv[1][1]  # the failed answer, as the model wrote it
    assert "validation error" in conv[2][1] and "stars" in conv[2][1]
    assert "unexpected_field" not in conv[2][1]  # the errors do not repeat the answer
    assert "1 item resubmitted (1 reasked)" in out.summary()


def test_reasks_are_bounded_by_output_retries_and_keep_only_the_latest_answer(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    mock.set_faults(["schema_mismatch", "invalid_json", "schema_mismatch"])
    out = nbagent.map(
        ["Broke in a week."],
        output=Review,
        output_retries=2,
        **options(mock, clock, "anthropic", tmp_path),
    )
    # two reasks allowed: three submissions (the retry policy's three attempts play no part)
    assert mock.batch_counts.create_requests["anthropic"] == 3
    a = out.attempts
    assert a["action"].tolist() == ["reask", "reask", "fail"]
    assert a["error_kind"].tolist() == ["OutputInvalid"] * 3
    assert a["batch_id"].nunique() == 3 and a["input_tokens"].gt(0).all()
    r = out.results
    assert r["error"][0] == "OutputInvalid" and r["reasks"][0] == 2
    assert "after 2 reasks" in r["error_message"][0]
    third = turns(next(iter(mock.batches[2].requests().values())))
    assert [role for role, _ in third] == ["user", "assistant", "user"]  # one failed answer
    assert "and then" in third[1][1]  # the latest (the broken JSON), not the first mismatch
    assert "unexpected_field" not in third[1][1]
    assert "not valid JSON" in third[2][1]


def test_a_retryable_failure_after_a_reask_resends_the_reask(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    mock.set_faults(["schema_mismatch", "500", "ok"])
    out = nbagent.map(["Broke."], output=Review, **options(mock, clock, "openai", tmp_path))
    a = out.attempts
    assert a["action"].tolist() == ["reask", "retry", "none"]
    assert out.results["reasks"][0] == 1 and isinstance(out.results["output"][0], Review)
    second, third = (next(iter(b.requests().values())) for b in mock.batches[1:])
    assert turns(second) == turns(third) and len(turns(third)) == 3


def test_tool_mode_forces_the_output_tool_and_reasks_with_a_tool_result(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    mock.set_faults(["schema_mismatch"])
    out = nbagent.map(
        ["Broke."], output=Review, output_mode="tool", **options(mock, clock, "anthropic", tmp_path)
    )
    assert isinstance(out.results["output"][0], Review) and out.results["reasks"][0] == 1
    first, second = (next(iter(b.requests().values())) for b in mock.batches)
    assert [t["name"] for t in first["tools"]] == ["final_answer"]
    assert first["tool_choice"] == {"type": "tool", "name": "final_answer"}
    call = second["messages"][1]["content"][-1]
    result = second["messages"][2]["content"][0]
    assert call["type"] == "tool_use" and result["type"] == "tool_result"
    assert result["tool_use_id"] == call["id"] and result["is_error"] is True


def test_a_finished_batch_resumed_checks_against_the_stored_schema(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    mock.set_faults(["ok", "schema_mismatch"])
    kw = options(mock, clock, "gemini", tmp_path)
    out = nbagent.map(PROMPTS[:2], output=Review, **kw)
    doc = json.loads(Path(kw["state"]).read_text())
    assert doc["output"]["mode"] == "native" and doc["output"]["retries"] == 2
    assert set(doc["output"]["schema"]["properties"]) == {"sentiment", "stars", "summary"}
    more = {"base_url": kw["base_url"], "api_key": "sk-test-not-a-key", "clock": clock}
    as_dicts = nbagent.batch.resume(kw["state"], show=False, **more)
    assert mock.batch_counts.create_requests["gemini"] == 2  # nothing sent again
    assert as_dicts.results["output"].tolist() == [v.model_dump() for v in out.results["output"]]
    assert as_dicts.results["reasks"].tolist() == [0, 1]
    assert as_dicts.results["stars"].tolist() == out.results["stars"].tolist()
    again = nbagent.batch.resume(kw["state"], show=False, output=Review, **more)
    assert again.results["output"].tolist() == out.results["output"].tolist()
    assert again.attempts["action"].tolist() == out.attempts["action"].tolist()

    class Other(BaseModel):
        title: str

    with pytest.raises(ConfigError, match="another schema than the batch began with"):
        nbagent.batch.resume(kw["state"], show=False, output=Other, **more)


class Killed(BaseException):
    """The kernel dying: nothing of nbagent's runs after it."""


def test_a_reask_planned_before_a_restart_is_sent_with_its_errors_after_it(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    from nbagent._loop._output_schema import OutputSchema
    from nbagent.batch._provider_backend import ProviderBatch

    mock.set_faults(["ok", "schema_mismatch"])
    kw = options(mock, clock, "anthropic", tmp_path)
    given = provider_options(
        PROMPTS[:2],
        model=kw["model"],
        retry=kw["retry"],
        state=kw["state"],
        agent_kwargs={k: kw[k] for k in ("base_url", "api_key", "clock", "poll")},
        output=Review,
    )
    batch = ProviderBatch.from_options(given, PROMPTS[:2], None, OutputSchema.of(Review))
    real = batch.client.create

    async def create(*args: Any, **kwargs: Any) -> Any:
        if mock.batch_counts.create_requests.get("anthropic", 0) == 1:
            raise Killed  # before the reask's batch is sent
        return await real(*args, **kwargs)

    batch.client.create = create  # type: ignore[method-assign]
    with pytest.raises(Killed):
        asyncio.run(batch.run())
    doc = json.loads(Path(kw["state"]).read_text())
    planned = doc["batches"][1]
    assert planned["submission"] == 2 and set(planned["tails"]) == {"1"}
    out = nbagent.batch.resume(
        kw["state"], show=False, output=Review, base_url=kw["base_url"], api_key="x", clock=clock
    )
    assert positions_sent(mock) == {0: 1, 1: 2}
    assert out.results["reasks"].tolist() == [0, 1]
    assert all(isinstance(v, Review) for v in out.results["output"])
    conv = turns(next(iter(mock.batches[1].requests().values())))
    assert len(conv) == 3 and "validation error" in conv[2][1]


def test_dry_run_counts_the_schema_the_requests_carry(mock: MockServer) -> None:
    kw = {"backend": "provider", "base_url": mock.url + "/v1", "dry_run": True}
    plain = nbagent.map(PROMPTS, model="openai:gpt-4o-mini", **kw)
    native = nbagent.map(PROMPTS, model="openai:gpt-4o-mini", output=Review, **kw)
    tool = nbagent.map(PROMPTS, model="openai:gpt-4o-mini", output=Review, output_mode="tool", **kw)
    for est in (native, tool):
        extra = est.rows["input_tokens"] - plain.rows["input_tokens"]
        assert extra.min() > 20 and extra.max() - extra.min() <= 1  # the schema, on every row
        assert est.cost_batch_usd > plain.cost_batch_usd
    assert mock.batch_counts.create_requests.get("openai", 0) == 0 and not mock.requests


def test_a_bad_output_option_is_refused_before_anything_is_sent(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="output_mode takes"):
        nbagent.map(
            PROMPTS, output=Review, output_mode="json", **options(mock, clock, "openai", tmp_path)
        )
    with pytest.raises(ConfigError, match="output_retries"):
        nbagent.map(
            PROMPTS, output=Review, output_retries=-1, **options(mock, clock, "openai", tmp_path)
        )
    assert mock.batch_counts.create_requests.get("openai", 0) == 0
    assert not (tmp_path / "openai.batch").exists()


def test_the_durable_log_gets_every_item_attempt(
    mock: MockServer, clock: VirtualClock, tmp_path: Path
) -> None:
    mock.set_faults(["ok", "500", "schema_mismatch"])
    log = tmp_path / "runs.sqlite"
    kw = options(mock, clock, "anthropic", tmp_path)
    out = nbagent.map(PROMPTS[:3], output=Review, log=str(log), **kw)
    logged = read_attempts(log)
    mine = ["run_id", "attempt", "action", "error_kind", "input_tokens", "status_code"]
    expect = out.attempts[mine].sort_values(["run_id", "attempt"]).reset_index(drop=True)
    got = logged[mine].sort_values(["run_id", "attempt"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expect)
    assert logged["worker"].notna().all() and logged["agent_id"].nunique() == 3
    # picked up again from the state file: the rows are written once, not twice
    nbagent.batch.resume(kw["state"], show=False, base_url=kw["base_url"], api_key="x", clock=clock)
    assert len(read_attempts(log)) == len(out.attempts) == 5


class Item(BaseModel):
    name: str
    price: float


class Node(BaseModel):
    value: int
    children: list[Node] = []


@pytest.mark.parametrize("target", [Review, list[Item], Node], ids=["object", "list", "recursive"])
def test_the_stored_schema_is_told_and_checked_as_the_first_run_did(target: Any) -> None:
    from nbagent._loop._args import resolve_model_spec
    from nbagent._loop._output_schema import OutputSchema
    from nbagent.batch._provider_output import BatchOutput

    provider = resolve_model_spec("openai:gpt-4o-mini", api_key="sk-test", base_url=None)
    first = BatchOutput(OutputSchema.of(target), mode="auto", retries=1, provider=provider)
    doc = json.loads(json.dumps(first.to_json()))  # through the state file
    again = BatchOutput.from_json(doc, provider=provider)
    assert (
        again.plan.format == first.plan.format and again.tools == first.tools
    )  # the same requests
    assert again.schema.fields == first.schema.fields
    value = {"name": "pen", "price": 2.5}
    answer = {
        Review: {"sentiment": "neutral", "stars": 3, "summary": "ok"},
        Node: {"value": 1, "children": [{"value": 2}]},  # an object at the root: not wrapped
    }.get(target, {"result": [value]})
    checked = again.schema.parse(json.dumps(answer))  # dicts: the class is not stored
    assert checked == answer.get("result", answer)
    with pytest.raises(nbagent.OutputInvalid):
        again.schema.parse(json.dumps({"result": 3}))
