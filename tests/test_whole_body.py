"""`nbagent.providers._whole_body`: a whole, non-streamed answer (a batch item's) is read by the
live stream's own reader and gives what the stream gives.

The whole bodies are made from real recorded streams by the official SDKs' own accumulators
(anthropic-sdk-python `accumulate_event`, openai-python `ChatCompletionStreamState`): what each
SDK says the non-streamed answer of that stream is. Gemini's is a recorded non-streamed body.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from nbagent.errors import ContentFiltered, InvalidResponse, StreamInterrupted
from nbagent.providers import AnthropicProvider, GeminiProvider, OpenAIProvider
from nbagent.providers._base import Completed
from nbagent.providers._sse import SSEParser
from tests.provider_support import fixture_text, read_whole, respond, run

KEY = {"api_key": "sk-test", "base_url": "http://127.0.0.1:9"}


def sse_data(text: str) -> list[dict[str, Any]]:
    events = SSEParser().feed(text.encode(), final=True)
    return [json.loads(e.data) for e in events if e.data.strip() not in ("", "[DONE]")]


def same(a: Completed, b: Completed) -> None:
    assert a.message == b.message
    assert a.stop_reason == b.stop_reason
    assert (a.usage.input_tokens, a.usage.output_tokens) == (
        b.usage.input_tokens,
        b.usage.output_tokens,
    )
    assert a.usage.cost_usd == pytest.approx(b.usage.cost_usd)
    assert a.model == b.model and a.response_id == b.response_id


@pytest.mark.parametrize(
    "name", ["anthropic-sdk-python__stream-text.txt", "anthropic-sdk-python__stream-tool-use.txt"]
)
def test_an_anthropic_message_reads_as_its_stream_did(name: str) -> None:
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter: Any = TypeAdapter(RawMessageStreamEvent)
    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for data in sse_data(fixture_text(name)):
        if data.get("type") == "ping":
            continue
        snapshot = accumulate_event(
            event=adapter.validate_python(data), current_snapshot=snapshot, json_bufs=bufs
        )
    whole = snapshot.model_dump(mode="json", exclude_none=True)
    provider = AnthropicProvider("claude-sonnet-4-0", **KEY)
    streamed = run(
        lambda c: AnthropicProvider("claude-sonnet-4-0", client=c, **KEY),
        respond(fixture_text(name)),
    )
    same(asyncio.run(read_whole(provider, whole)), streamed.completed)


@pytest.mark.parametrize(
    "name",
    ["openai-python__chat-stream-text.txt", "openai-python__chat-stream-parallel-tool-calls.txt"],
)
def test_a_chat_completion_reads_as_its_stream_did(name: str) -> None:
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state: Any = ChatCompletionStreamState()
    for data in sse_data(fixture_text(name)):
        state.handle_chunk(ChatCompletionChunk.model_validate(data))
    whole = state.get_final_completion().model_dump(mode="json", exclude_none=True)
    provider = OpenAIProvider("gpt-4o", **KEY)
    streamed = run(lambda c: OpenAIProvider("gpt-4o", client=c, **KEY), respond(fixture_text(name)))
    same(asyncio.run(read_whole(provider, whole)), streamed.completed)


def test_a_gemini_safety_stop_in_a_whole_body_is_content_filtered() -> None:
    doc = yaml.safe_load(fixture_text("pydantic-ai__gemini-finish-safety.txt"))
    body = doc["interactions"][0]["response"]["parsed_body"]
    provider = GeminiProvider("gemini-1.5-flash", **KEY)
    with pytest.raises(ContentFiltered, match="SAFETY"):
        asyncio.run(read_whole(provider, body))


def test_a_refused_chat_completion_is_content_filtered_as_live() -> None:
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3},
    }
    with pytest.raises(ContentFiltered, match="I can't help"):
        asyncio.run(read_whole(OpenAIProvider("gpt-4o", **KEY), body))


def test_a_responses_object_reads_through_its_terminal_event() -> None:
    from nbagent.providers import ResponsesProvider

    body = {
        "id": "resp_1",
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "model": "gpt-4o-mini",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Half an ans"}],
            }
        ],
        "usage": {"input_tokens": 10, "output_tokens": 50},
    }
    done = asyncio.run(read_whole(ResponsesProvider("gpt-4o-mini", **KEY), body))
    assert done.message.text == "Half an ans" and done.stop_reason == "max_tokens"
    assert done.usage.output_tokens == 50


def test_a_body_that_is_no_answer_is_invalid_and_one_with_no_end_is_interrupted() -> None:
    provider = AnthropicProvider("claude-sonnet-4-0", **KEY)
    with pytest.raises(InvalidResponse, match="content list"):
        asyncio.run(read_whole(provider, {"id": "msg_1", "content": "text"}))
    gemini = GeminiProvider("gemini-2.5-flash", **KEY)
    with pytest.raises(StreamInterrupted, match="answer ended before a finishReason"):
        asyncio.run(read_whole(gemini, {"candidates": [{"content": {"parts": []}}]}))
