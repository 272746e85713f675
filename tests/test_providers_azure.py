"""Azure OpenAI (Chat Completions and Responses) against recorded Azure streams (MockTransport)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from provider_support import (
    SENTINEL_KEY,
    Chunks,
    govcr_body,
    json_lines_sse,
    respond,
    run,
    vcr_interaction,
)

from nbagent.errors import Action, ConfigError, ContentFiltered, classify
from nbagent.providers import TextPart
from nbagent.providers._azure import AzureChatProvider, AzureResponsesProvider
from nbagent.providers._models import resolve_model

CHAT = "fantasy__azure-chat-stream-content-filter.txt"
RESPONSES = "ai__azure-responses-stream-content-filters.txt"
ENDPOINT = "https://fantasy-playground-resource.openai.azure.com"


def chat(deployment: str = "gpt-5-mini", **kw: Any) -> Any:
    def factory(client: httpx.AsyncClient) -> AzureChatProvider:
        return AzureChatProvider(
            deployment, api_key=SENTINEL_KEY, base_url=ENDPOINT, client=client, **kw
        )

    return factory


def responses(deployment: str = "gpt-5.1", **kw: Any) -> Any:
    def factory(client: httpx.AsyncClient) -> AzureResponsesProvider:
        return AzureResponsesProvider(
            deployment, api_key=SENTINEL_KEY, base_url=ENDPOINT, client=client, **kw
        )

    return factory


def test_chat_fixture_first_chunk_with_only_prompt_filter_results() -> None:
    served = run(chat(), respond(govcr_body(CHAT)))
    done = served.completed
    assert done.message.text == "Oi!"
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (19, 76)
    assert done.model == "gpt-5-mini-2025-08-07"
    (sent,) = served.requests
    assert str(sent.url) == vcr_interaction(CHAT)["request"]["url"]  # the v1 endpoint
    assert sent.headers["api-key"] == SENTINEL_KEY
    assert "authorization" not in sent.headers
    assert served.body["model"] == "gpt-5-mini"
    assert "max_completion_tokens" in served.body


def test_chat_fixture_in_one_burst_and_in_tiny_pieces_gives_the_same_answer() -> None:
    raw = govcr_body(CHAT).encode()
    burst = run(chat(), respond(raw)).completed
    pieces = Chunks([raw[i : i + 5] for i in range(0, len(raw), 5)])
    trickle = run(chat(), respond(stream=pieces)).completed
    assert burst.message == trickle.message and burst.usage == trickle.usage


def filtered_stream(category: str) -> str:
    chunks = [
        {
            "choices": [],
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
        },
        {"choices": [{"index": 0, "delta": {"content": "Here is"}, "content_filter_results": {}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {},
                    "finish_reason": "content_filter",
                    "content_filter_results": {
                        category: {"filtered": True, "severity": "high"},
                        "sexual": {"filtered": False, "severity": "safe"},
                    },
                }
            ]
        },
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def test_content_filter_finish_is_content_filtered_naming_the_category() -> None:
    served = run(chat(), respond(filtered_stream("violence")))
    err = served.error
    assert isinstance(err, ContentFiltered)
    assert "violence (high)" in err.message and "sexual" not in err.message
    assert classify(err) is Action.FAIL
    assert [p.text for p in served.parts if isinstance(p, TextPart)] == ["Here is"]


def test_a_prompt_the_filter_rejects_is_content_filtered() -> None:
    body = {
        "error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
            "content management policy.",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    headers = {"content-type": "application/json", "apim-request-id": "apim-1"}
    err = run(chat(), respond(json.dumps(body), status=400, headers=headers)).error
    assert isinstance(err, ContentFiltered)
    assert err.request_id == "apim-1"


def test_dated_endpoint() -> None:
    served = run(chat(api_version="2024-10-21"), respond(govcr_body(CHAT)))
    assert str(served.requests[0].url) == (
        f"{ENDPOINT}/openai/deployments/gpt-5-mini/chat/completions?api-version=2024-10-21"
    )
    p = AzureResponsesProvider("dep", api_key="k-1234", base_url=ENDPOINT + "/openai/v1/")
    assert p.url == f"{ENDPOINT}/openai/v1/responses"
    p = AzureResponsesProvider(
        "dep", api_key="k-1234", base_url=ENDPOINT, api_version="2025-04-01-preview"
    )
    assert p.url == f"{ENDPOINT}/openai/responses?api-version=2025-04-01-preview"
    with pytest.raises(ConfigError, match="api_version"):
        AzureChatProvider("dep", api_key="k-1234", base_url=ENDPOINT, api_version="2024?x=1")


def test_responses_fixture_with_content_filters_on_completion() -> None:
    served = run(responses(), respond(json_lines_sse(RESPONSES)))
    done = served.completed
    assert done.message.text == "Hello"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (11, 11)
    (sent,) = served.requests
    assert str(sent.url) == f"{ENDPOINT}/openai/v1/responses"
    assert sent.headers["api-key"] == SENTINEL_KEY
    assert served.body["store"] is False and served.body["model"] == "gpt-5.1"


def test_model_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        resolve_model("azure:dep", api_key="k-1234")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", ENDPOINT)
    with pytest.raises(ConfigError, match="AZURE_OPENAI_API_KEY"):
        resolve_model("azure:dep")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", SENTINEL_KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-10-21")
    p = resolve_model("azure:dep")
    assert isinstance(p, AzureChatProvider) and p.name == "azure"
    assert p.url.endswith("/openai/deployments/dep/chat/completions?api-version=2024-10-21")
    r = resolve_model("azure-responses:dep", api_version="v1")
    assert isinstance(r, AzureResponsesProvider) and r.url == f"{ENDPOINT}/openai/v1/responses"
    assert SENTINEL_KEY not in repr(p) + repr(r)
    with pytest.raises(ConfigError, match="Azure OpenAI only"):
        resolve_model("openai:gpt-4o", api_key="k-1234", api_version="2024-10-21")
