"""The mock server's Gemini, Responses and Azure paths over HTTP, and its bounded request log."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import test_mock_server

from nbagent.mock import MockServer
from nbagent.mock._conversation import SIGNATURE_STANDIN, encrypted_for, sign

GEMINI = "/v1beta/models/demo:streamGenerateContent?alt=sse"
server = test_mock_server.server  # the same fixtures as the other mock server tests
client = test_mock_server.client


def data_lines(raw: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


def gemini_body(prompt: str, *history: dict[str, Any], tools: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": prompt}]}, *history],
        "generationConfig": {"maxOutputTokens": 512},
    }
    if tools:
        declaration = {
            "name": "calculator",
            "description": "Arithmetic.",
            "parametersJsonSchema": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
            },
        }
        body["tools"] = [{"functionDeclarations": [declaration]}]
    return body


# --- Gemini ---------------------------------------------------------------------------------------


def test_gemini_text_stream_ends_with_a_signed_empty_part(client: httpx.Client) -> None:
    r = client.post(GEMINI, json=gemini_body("Tell me about backoff."))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = data_lines(r.text)
    text = "".join(
        p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"]
    )
    assert "“Tell me about backoff”" in text
    last = chunks[-1]["candidates"][0]
    assert last["finishReason"] == "STOP"
    assert (
        last["content"]["parts"][-1]["text"] == ""
        and last["content"]["parts"][-1]["thoughtSignature"]
    )
    assert all("usageMetadata" in c for c in chunks)


def test_gemini_function_call_is_signed_and_the_history_must_keep_it(
    client: httpx.Client,
) -> None:
    r = client.post(GEMINI, json=gemini_body("What is 17 * 23 + 4?", tools=True))
    (call_part,) = data_lines(r.text)[-1]["candidates"][0]["content"]["parts"]
    call = call_part["functionCall"]
    assert call["name"] == "calculator"
    assert call_part["thoughtSignature"] == sign("calculator", call["args"])
    result = {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "calculator", "response": {"output": "395"}}}
        ],
    }

    def follow(part: dict[str, Any]) -> httpx.Response:
        model_turn = {"role": "model", "parts": [part]}
        return client.post(
            GEMINI, json=gemini_body("What is 17 * 23 + 4?", model_turn, result, tools=True)
        )

    assert follow(call_part).status_code == 200
    unsigned = {"functionCall": call}
    refused = follow(unsigned)
    assert refused.status_code == 400
    assert "missing a thought_signature" in refused.json()["error"]["message"]
    altered = {**call_part, "thoughtSignature": call_part["thoughtSignature"][:-4] + "AAA="}
    assert follow(altered).json()["error"]["message"] == "Corrupted thought signature."
    assert follow({**call_part, "thoughtSignature": SIGNATURE_STANDIN}).status_code == 200


def test_gemini_per_minute_and_per_day_quotas(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["429:retry_after=7", "quota", "529"])
    minute = client.post(GEMINI, json=gemini_body("hi"))
    assert minute.status_code == 429 and "retry-after" not in minute.headers
    details = minute.json()["error"]["details"]
    assert details[1]["violations"][0]["quotaId"].startswith("GenerateRequestsPerMinute")
    assert details[2] == {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}
    day = client.post(GEMINI, json=gemini_body("hi"))
    assert day.status_code == 429
    violation = day.json()["error"]["details"][1]["violations"][0]
    assert violation["quotaId"] == "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
    assert violation["quotaDimensions"]["model"] == "demo"
    overloaded = client.post(GEMINI, json=gemini_body("hi"))
    assert overloaded.status_code == 503
    assert overloaded.json()["error"]["status"] == "UNAVAILABLE"


def test_gemini_non_streaming_and_bad_requests(client: httpx.Client) -> None:
    r = client.post("/v1beta/models/demo:generateContent", json=gemini_body("hi"))
    assert r.status_code == 200 and r.json()["candidates"][0]["finishReason"] == "STOP"
    r = client.post(GEMINI, json={"contents": [{"role": "robot", "parts": []}]})
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"


# --- Responses ------------------------------------------------------------------------------------


def responses_body(prompt: str, *items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "o4-mini",
        "input": [{"role": "user", "content": prompt}, *items],
        "stream": True,
        "store": False,
        **extra,
    }


def events(raw: str) -> list[dict[str, Any]]:
    return data_lines(raw)


def test_responses_stream_event_sequence(client: httpx.Client) -> None:
    r = client.post("/v1/responses", json=responses_body("Tell me about backoff."))
    kinds = [e["type"] for e in events(r.text)]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert [e["sequence_number"] for e in events(r.text)] == list(range(len(kinds)))


def test_responses_reasoning_item_must_come_back_unaltered(client: httpx.Client) -> None:
    include = {"include": ["reasoning.encrypted_content"]}
    r = client.post("/v1/responses", json=responses_body("hi", **include))
    (item,) = [
        e["item"]
        for e in events(r.text)
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    ]
    assert item["encrypted_content"] == encrypted_for(item["id"])
    answer = {"role": "assistant", "content": "Hello."}
    ok = client.post("/v1/responses", json=responses_body("hi", item, answer, **include))
    assert ok.status_code == 200
    altered = {**item, "encrypted_content": item["encrypted_content"][:-2] + "xx"}
    refused = client.post("/v1/responses", json=responses_body("hi", altered, answer))
    assert (
        refused.status_code == 400 and "could not be verified" in refused.json()["error"]["message"]
    )
    stripped = {k: v for k, v in item.items() if k != "encrypted_content"}
    refused = client.post("/v1/responses", json=responses_body("hi", stripped, answer))
    assert "Items are not persisted" in refused.json()["error"]["message"]


def test_responses_midstream_fault_is_an_error_event_then_failed(
    server: MockServer, client: httpx.Client
) -> None:
    server.set_faults(["overloaded_midstream"])
    r = client.post("/v1/responses", json=responses_body("Tell me about backoff."))
    kinds = [e["type"] for e in events(r.text)]
    assert kinds[-2:] == ["error", "response.failed"]


# --- Azure ----------------------------------------------------------------------------------------


def test_azure_chat_paths_stream_with_content_filter_results(client: httpx.Client) -> None:
    body = {"model": "dep", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    for path in (
        "/openai/v1/chat/completions",
        "/openai/deployments/dep/chat/completions?api-version=2024-10-21",
    ):
        chunks = data_lines(client.post(path, json=body).text)
        assert chunks[0]["choices"] == [] and "prompt_filter_results" in chunks[0]
        assert all("content_filter_results" in c["choices"][0] for c in chunks[1:] if c["choices"])


# --- the request log (issue 17: memory over a long session) ---------------------------------------


def test_the_request_log_keeps_a_bounded_window_and_counts_the_rest() -> None:
    with MockServer(max_records=3) as s, httpx.Client(base_url=s.url, timeout=10) as c:
        for i in range(7):
            c.post(GEMINI, json=gemini_body(f"question {i}"))
        kept = s.requests
        assert len(kept) == 3 and s.dropped_requests == 4
        assert [r.index for r in kept] == [4, 5, 6]  # the newest, each numbered since the start
        assert kept[-1].body["contents"][0]["parts"][0]["text"] == "question 6"
        assert "7 requests" in repr(s)
        s.clear_requests()
        assert (s.requests, s.dropped_requests) == ([], 0)
    with MockServer(max_records=0) as s, httpx.Client(base_url=s.url, timeout=10) as c:
        c.get("/health")
        assert (s.requests, s.dropped_requests) == ([], 1)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_max_records_must_be_a_whole_number(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_records"):
        MockServer(max_records=bad)
