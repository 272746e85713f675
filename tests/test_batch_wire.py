"""The providers' batch API clients on their wire shapes: status words, counts, result lines,
item errors, streamed downloads (`nbagent.providers._anthropic_batch`, `_openai_batch`,
`_gemini_batch`, `_batch_wire`), against httpx MockTransport servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nbagent.errors import (
    BadRequest,
    ConfigError,
    ContextOverflow,
    InvalidResponse,
    Overloaded,
    QuotaExceeded,
    RateLimited,
    ServerError,
    StreamInterrupted,
)
from nbagent.providers import AnthropicProvider, GeminiProvider, OpenAIProvider
from nbagent.providers._anthropic_batch import STATUS as ANTHROPIC_STATUS
from nbagent.providers._anthropic_batch import AnthropicBatches
from nbagent.providers._gemini_batch import STATUS as GEMINI_STATUS
from nbagent.providers._gemini_batch import GeminiBatches
from nbagent.providers._models import batch_client
from nbagent.providers._openai_batch import STATUS as OPENAI_STATUS
from nbagent.providers._openai_batch import OpenAIBatches
from nbagent.providers._server_wish import rfc3339

FIXTURES = Path(__file__).parent / "fixtures" / "batches"
URL = "http://127.0.0.1:9"


def lines(name: str) -> list[dict[str, Any]]:
    text = (FIXTURES / name).read_text()
    first, _, rest = text.partition("\n")
    assert first.startswith("# source:")
    return [json.loads(line) for line in rest.splitlines() if line.strip()]


def collect(agen: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [x async for x in agen]

    return asyncio.run(go())


class Chunks(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes], cut: bool = False) -> None:
        self.pieces, self.cut = pieces, cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece
        if self.cut:
            raise httpx.RemoteProtocolError("peer closed connection")


def test_each_status_table_uses_its_providers_own_spelling() -> None:
    # Anthropic: canceling, one l; OpenAI: cancelling and cancelled, two
    assert ANTHROPIC_STATUS == {
        "in_progress": "running",
        "canceling": "canceling",
        "ended": "ended",
    }
    assert OPENAI_STATUS["cancelling"] == "canceling" and OPENAI_STATUS["cancelled"] == "ended"
    assert "cancelling" not in ANTHROPIC_STATUS and "canceling" not in OPENAI_STATUS
    assert set(OPENAI_STATUS) == {
        "validating",
        "failed",
        "in_progress",
        "finalizing",
        "completed",
        "expired",
        "cancelling",
        "cancelled",
    }
    assert {GEMINI_STATUS[s] for s in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING")} == {"running"}


def test_anthropic_batch_documents_read_into_phases_and_counts() -> None:
    client = AnthropicBatches(AnthropicProvider("claude-sonnet-4-0", api_key="k", base_url=URL))
    doc = {  # the API reference's example MessageBatch
        "id": "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message_batch",
        "processing_status": "canceling",
        "request_counts": {
            "processing": 90,
            "succeeded": 7,
            "errored": 1,
            "canceled": 2,
            "expired": 0,
        },
        "created_at": "2024-08-20T18:37:24.100435Z",
        "expires_at": "2024-08-21T18:37:24.100435Z",
        "results_url": None,
    }
    status = client.status(doc)
    assert (status.phase, status.status, status.total) == ("canceling", "canceling", 100)
    assert status.ending is None  # Anthropic's counts say what expired or was canceled
    assert status.created_at == pytest.approx(1724179044.100435)


def test_anthropic_result_lines_become_typed_outcomes_whatever_their_order() -> None:
    client = AnthropicBatches(AnthropicProvider("claude-sonnet-4-0", api_key="k", base_url=URL))
    got = {r.custom_id: r for r in map(client._item, lines("anthropic-results.jsonl"))}
    assert got["feedbeef-3-1"].kind == "succeeded"
    done = asyncio.run(client.read(got["feedbeef-3-1"]))
    assert done.message.text == "Hello again! It's nice to see you."
    live = 11 * 3e-6 + 36 * 15e-6
    assert done.usage.cost_usd == pytest.approx(live / 2)  # the batch price
    assert isinstance(got["feedbeef-0-1"].error, BadRequest)
    assert got["feedbeef-0-1"].request_id == "req_011CSHoEeqs5C35K2UUqR7Fy"
    assert isinstance(got["feedbeef-1-1"].error, QuotaExceeded)
    assert isinstance(got["feedbeef-2-1"].error, Overloaded)
    assert got["feedbeef-4-1"].kind == "expired" and isinstance(
        got["feedbeef-4-1"].error, ServerError
    )
    assert got["feedbeef-5-1"].kind == "canceled"


def test_openai_output_and_error_lines_and_a_failed_batch() -> None:
    client = OpenAIBatches(OpenAIProvider("gpt-4o-mini", api_key="k", base_url=URL + "/v1"))
    got = {r.custom_id: r for r in map(client._item, lines("openai-output-and-errors.jsonl"))}
    assert got["feedbeef-1-1"].kind == "succeeded"
    assert asyncio.run(client.read(got["feedbeef-1-1"])).message.text == "2 + 2 equals 4."
    assert isinstance(got["feedbeef-0-1"].error, ContextOverflow)
    assert isinstance(got["feedbeef-2-1"].error, QuotaExceeded)
    assert got["feedbeef-3-1"].kind == "expired"
    failed = client.status(
        {
            "id": "batch_abc",
            "object": "batch",
            "status": "failed",
            "created_at": 1714508499,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "errors": {
                "object": "list",
                "data": [
                    {
                        "code": "token_limit_exceeded",
                        "line": None,
                        "message": "Enqueued token limit reached for gpt-4o-mini.",
                        "param": None,
                    }
                ],
            },
        }
    )
    assert failed.phase == "ended" and "token_limit_exceeded" in (failed.failure or "")
    assert isinstance(client.failure_error(failed), RateLimited)  # later, the queue takes it
    expired = client.status(
        {
            "id": "b",
            "status": "expired",
            "request_counts": {"total": 10, "completed": 6, "failed": 1},
        }
    )
    assert expired.counts == {
        "processing": 0,
        "succeeded": 6,
        "errored": 1,
        "expired": 3,
        "canceled": 0,
    }
    assert (expired.ending, failed.ending) == ("expired", None)
    cancelled = client.status({"id": "c", "status": "cancelled", "request_counts": {}})
    assert cancelled.ending == "canceled"


def test_gemini_operations_and_item_errors_by_their_grpc_codes() -> None:
    client = GeminiBatches(GeminiProvider("gemini-2.5-flash", api_key="k", base_url=URL))
    status = client.status(
        {
            "name": "batches/123",
            "metadata": {
                "displayName": "nb-x-b1",
                "state": "JOB_STATE_RUNNING",
                "batchStats": {
                    "requestCount": "10",
                    "successfulRequestCount": "4",
                    "pendingRequestCount": "6",
                },
                "createTime": "2025-06-03T10:00:00Z",
            },
        }
    )
    assert (status.phase, status.tag, status.counts["processing"]) == ("running", "nb-x-b1", 6)
    assert status.ending is None
    ended = client.status({"name": "batches/9", "metadata": {"state": "BATCH_STATE_EXPIRED"}})
    assert (ended.phase, ended.ending) == ("ended", "expired")
    assert isinstance(
        client._item("k1", {"error": {"code": 3, "message": "bad"}}).error, BadRequest
    )
    assert isinstance(client._item("k2", {"error": {"code": 14, "message": "x"}}).error, Overloaded)
    assert isinstance(
        client._item("k3", {"error": {"code": 13, "message": "x"}}).error, ServerError
    )


def test_results_are_read_line_by_line_and_a_cut_download_is_interrupted() -> None:
    body = [json.dumps(x).encode() + b"\n" for x in lines("anthropic-results.jsonl")]
    raw = b"".join(body)
    pieces = [raw[i : i + 37] for i in range(0, len(raw), 37)]  # lines split across reads

    def handler(cut: bool) -> Any:
        def answer(request: httpx.Request) -> httpx.Response:
            assert request.headers["x-api-key"] == "k"
            assert request.headers["accept"] == "application/binary"
            return httpx.Response(200, stream=Chunks(pieces, cut=cut))

        return answer

    for cut in (False, True):
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler(cut)))
        batches = AnthropicBatches(
            AnthropicProvider("claude-sonnet-4-0", api_key="k", base_url=URL, client=client)
        )
        status = batches.status(
            {
                "id": "msgbatch_1",
                "processing_status": "ended",
                "results_url": f"{URL}/v1/messages/batches/msgbatch_1/results",
            }
        )
        if cut:
            with pytest.raises(StreamInterrupted, match="results download broke off"):
                collect(batches.results(status))
        else:
            assert [r.custom_id for r in collect(batches.results(status))] == [
                "feedbeef-3-1",
                "feedbeef-0-1",
                "feedbeef-1-1",
                "feedbeef-2-1",
                "feedbeef-4-1",
                "feedbeef-5-1",
            ]


def test_a_results_url_on_another_host_is_never_sent_the_key() -> None:
    batches = AnthropicBatches(AnthropicProvider("claude-sonnet-4-0", api_key="k", base_url=URL))
    status = batches.status(
        {
            "id": "msgbatch_1",
            "processing_status": "ended",
            "results_url": "https://elsewhere.example/results",
        }
    )
    with pytest.raises(InvalidResponse, match="on another host"):
        collect(batches.results(status))


def test_a_429_on_a_batch_call_is_the_typed_rate_limit_with_its_wait() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
        return httpx.Response(429, json=body, headers={"retry-after": "7"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    batches = AnthropicBatches(
        AnthropicProvider("claude-sonnet-4-0", api_key="k", base_url=URL, client=client)
    )
    with pytest.raises(RateLimited) as caught:
        asyncio.run(batches.retrieve("msgbatch_1"))
    assert caught.value.retry_after == 7.0


def test_the_create_calls_carry_the_tag_and_the_items_as_documented() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        request.read()
        if request.url.path.endswith("/files"):
            return httpx.Response(200, json={"id": "file-abc", "object": "file"})
        return httpx.Response(
            200,
            json={
                "id": "batch_1",
                "status": "validating",
                "metadata": json.loads(request.content)["metadata"],
            },
        )

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    client = OpenAIBatches(
        OpenAIProvider("gpt-4o-mini", api_key="k", base_url=URL + "/v1", client=http)
    )
    req = client.request("Hi", system=None, max_tokens=50, options={})
    items = [client.item("feedbeef-0-1", client.request_body(req))]
    status = asyncio.run(client.create(lambda: items, count=1, size=len(items[0]), tag="nb-t-b1"))
    assert status.tag == "nb-t-b1" and status.phase == "running"
    upload, create = seen
    assert b'name="purpose"\r\n\r\nbatch' in upload.content
    line = json.loads(items[0])
    assert line["url"] == "/v1/chat/completions" and line["method"] == "POST"
    assert "stream" not in line["body"] and line["body"]["max_tokens"] == 50
    assert int(upload.headers["content-length"]) == len(upload.content)
    assert json.loads(create.content)["completion_window"] == "24h"


def test_a_provider_with_no_batch_api_is_a_config_error() -> None:
    openrouter = OpenAIProvider("x/y", api_key="k", base_url=URL, name="openrouter")
    with pytest.raises(ConfigError, match="'openrouter' has no batch API"):
        batch_client(openrouter)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2024-08-20T18:37:24.100435Z", 1724179044.100435),  # the API reference's six digits
        ("2024-08-20T18:37:24Z", 1724179044.0),
        ("2024-08-20T18:37:24.1Z", 1724179044.1),  # fewer digits: Python 3.10 takes 3 or 6
        ("2024-08-20T18:37:24.123456789+02:00", 1724171844.123456),  # nine, and an offset
    ],
)
def test_rfc3339_times_read_alike_on_every_python(text: str, seconds: float) -> None:
    assert rfc3339(text) == pytest.approx(seconds, abs=1e-6)
