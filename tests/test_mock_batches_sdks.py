"""The official SDKs pointed at the mock's batch endpoints: anthropic's ``messages.batches``,
openai's ``files`` + ``batches``, google-genai's ``batches`` with inline requests. Each call is
the SDK's own, so a shape the SDK cannot read fails here."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from mock_support import BatchClock
from test_mock_batches import anthropic_requests, jsonl, openai_lines

from nbagent.mock import MockServer

pytestmark = pytest.mark.e2e

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")


@pytest.fixture
def clock() -> BatchClock:
    return BatchClock()


@pytest.fixture
def closing() -> Iterator[ExitStack]:
    """Closes the SDK clients a test opens: an unclosed one's socket fails a later test."""
    with ExitStack() as stack:
        yield stack


@pytest.fixture
def server(clock: BatchClock) -> Iterator[MockServer]:
    with MockServer(batch_duration_s=10.0, batch_clock=clock) as mock:
        yield mock


def test_anthropic_sdk_create_retrieve_list_results_cancel_delete(
    server: MockServer, clock: BatchClock, closing: ExitStack
) -> None:
    client = closing.enter_context(
        anthropic.Anthropic(base_url=server.url, api_key="sk-test", max_retries=0)
    )
    server.set_faults(["ok", "500", "ok", "invalid"])
    batch = client.messages.batches.create(requests=anthropic_requests(4))
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 4
    other = client.messages.batches.create(requests=anthropic_requests(3, prefix="c"))
    clock.advance(5.0)
    canceling = client.messages.batches.cancel(other.id)
    assert canceling.processing_status == "canceling"
    clock.advance(5.0)
    done = client.messages.batches.retrieve(batch.id)
    assert done.processing_status == "ended" and done.ended_at is not None
    assert (done.request_counts.succeeded, done.request_counts.errored) == (2, 2)
    results = list(client.messages.batches.results(batch.id))
    assert [r.custom_id for r in results] != ["r0", "r1", "r2", "r3"]  # any order
    by_id = {r.custom_id: r.result for r in results}
    assert by_id["r0"].type == "succeeded" and by_id["r0"].message.content[0].text
    assert by_id["r1"].type == "errored" and by_id["r1"].error.error.type == "api_error"
    assert by_id["r3"].error.error.type == "invalid_request_error"
    canceled = {r.result.type for r in client.messages.batches.results(other.id)}
    assert "canceled" in canceled
    listed = [b.id for b in client.messages.batches.list(limit=1)]  # pages through both
    assert listed == [other.id, batch.id]
    deleted = client.messages.batches.delete(batch.id)
    assert deleted.type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(batch.id)


def test_anthropic_sdk_reads_expired_results(
    server: MockServer, clock: BatchClock, closing: ExitStack
) -> None:
    server.expire_after_s = 5.0
    client = closing.enter_context(
        anthropic.Anthropic(base_url=server.url, api_key="sk-test", max_retries=0)
    )
    batch = client.messages.batches.create(requests=anthropic_requests(10))
    clock.advance(6.0)
    kinds = [r.result.type for r in client.messages.batches.results(batch.id)]
    assert "expired" in kinds and "succeeded" in kinds and len(kinds) == 10


def test_anthropic_sdk_sees_a_create_429_and_a_cut_download(
    server: MockServer, clock: BatchClock, closing: ExitStack
) -> None:
    client = closing.enter_context(
        anthropic.Anthropic(base_url=server.url, api_key="sk-test", max_retries=0)
    )
    server.set_faults(["create:429:retry_after=7", "results:cut"])
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.batches.create(requests=anthropic_requests(2))
    assert info.value.response.headers["retry-after"] == "7"
    batch = client.messages.batches.create(requests=anthropic_requests(6))
    clock.advance(10.0)
    with pytest.raises(Exception, match="incomplete|peer closed"):
        list(client.messages.batches.results(batch.id))
    assert len(list(client.messages.batches.results(batch.id))) == 6


def test_openai_sdk_files_and_batches(
    server: MockServer, clock: BatchClock, closing: ExitStack
) -> None:
    client = closing.enter_context(
        openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
    )
    server.set_faults(["ok", "500", "ok"])
    data = openai_lines(3)
    file = client.files.create(file=("input.jsonl", io.BytesIO(data)), purpose="batch")
    assert file.purpose == "batch" and file.bytes == len(data)
    assert client.files.retrieve(file.id).filename == "input.jsonl"
    batch = client.batches.create(
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"nbagent_tag": "abc"},
    )
    assert batch.status == "validating" and batch.metadata == {"nbagent_tag": "abc"}
    clock.advance(5.0)
    running = client.batches.retrieve(batch.id)
    assert running.status == "in_progress" and running.request_counts is not None
    clock.advance(5.0)
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 1)
    assert done.output_file_id and done.error_file_id
    output = jsonl(client.files.content(done.output_file_id).content)
    errors = jsonl(client.files.content(done.error_file_id).content)
    assert sorted(x["custom_id"] for x in output) == ["o0", "o2"]
    assert errors[0]["custom_id"] == "o1" and errors[0]["response"]["status_code"] == 500
    assert [b.id for b in client.batches.list(limit=10)] == [batch.id]


def test_openai_sdk_cancel_and_every_line_failed(
    server: MockServer, clock: BatchClock, closing: ExitStack
) -> None:
    client = closing.enter_context(
        openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
    )
    file = client.files.create(file=("in.jsonl", io.BytesIO(openai_lines(4))), purpose="batch")
    first = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    clock.advance(5.0)
    assert client.batches.cancel(first.id).status == "cancelling"
    clock.advance(1.0)
    assert client.batches.retrieve(first.id).status == "cancelled"
    server.set_faults(["500", "500", "500", "500"])
    failing = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    clock.advance(10.0)
    done = client.batches.retrieve(failing.id)
    assert done.status == "completed" and done.output_file_id is None and done.error_file_id


def test_openai_sdk_against_azure_paths(
    server: MockServer, clock: BatchClock, closing: ExitStack
) -> None:
    client = closing.enter_context(
        openai.AzureOpenAI(
            azure_endpoint=server.url, api_key="k", api_version="2025-04-01-preview", max_retries=0
        )
    )
    lines = openai_lines(2, endpoint="/chat/completions")
    file = client.files.create(file=("in.jsonl", io.BytesIO(lines)), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/chat/completions", completion_window="24h"
    )
    clock.advance(10.0)
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    assert len(jsonl(client.files.content(done.output_file_id).content)) == 2
    assert server.batch_counts.batches_created == {"azure": 1}


@pytest.fixture
def genai_client(server: MockServer) -> Iterator[Any]:
    from google.genai import types

    options = types.HttpOptions(
        base_url=server.url, retry_options=types.HttpRetryOptions(attempts=1)
    )
    client = genai.Client(api_key="test-key", http_options=options)
    yield client
    client.close()  # its connection, or a later test meets it as an unclosed socket


def test_genai_sdk_inline_batch(server: MockServer, clock: BatchClock, genai_client: Any) -> None:
    client = genai_client
    server.set_faults(["ok", "503", "ok"])
    requests = [
        {"contents": [{"role": "user", "parts": [{"text": f"Describe item {i}."}]}],
         "metadata": {"key": f"k{i}"}}
        for i in range(3)
    ]  # fmt: skip
    job = client.batches.create(model="demo", src=requests, config={"display_name": "tag-7"})
    assert job.name.startswith("batches/") and job.state.name == "JOB_STATE_PENDING"
    assert job.display_name == "tag-7" and job.model == "models/demo"
    clock.advance(5.0)
    assert client.batches.get(name=job.name).state.name == "JOB_STATE_RUNNING"
    clock.advance(5.0)
    done = client.batches.get(name=job.name)
    assert done.state.name == "JOB_STATE_SUCCEEDED" and done.end_time is not None
    inline = done.dest.inlined_responses
    assert [r.metadata for r in inline] == [{"key": "k0"}, {"key": "k1"}, {"key": "k2"}]
    assert inline[0].response.text and inline[2].response.text
    assert inline[1].response is None and inline[1].error.code == 14  # UNAVAILABLE
    listed = list(client.batches.list(config={"page_size": 5}))
    assert [j.name for j in listed] == [job.name]
    assert listed[0].display_name == "tag-7"


def test_genai_sdk_cancel_and_delete(
    server: MockServer, clock: BatchClock, genai_client: Any
) -> None:
    client = genai_client
    requests = [{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}]
    job = client.batches.create(model="demo", src=requests, config={"display_name": "x"})
    clock.advance(2.0)
    client.batches.cancel(name=job.name)
    clock.advance(1.0)
    cancelled = client.batches.get(name=job.name)
    assert cancelled.state.name == "JOB_STATE_CANCELLED" and cancelled.dest is None
    client.batches.delete(name=job.name)
    assert server.batch(job.name).deleted
