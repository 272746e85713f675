"""GeminiProvider against recorded Gemini streams and errors, served through MockTransport."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest
from provider_support import (
    SENTINEL_KEY,
    SSE,
    govcr_body,
    govcr_request,
    respond,
    run,
    run_log_error,
    vcr_body_string,
    vcr_interaction,
    vcr_parsed_body,
)

from nbagent._core._messages import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from nbagent.errors import (
    Action,
    AuthFailed,
    ContentFiltered,
    ContextOverflow,
    ModelNotFound,
    Overloaded,
    QuotaExceeded,
    RateLimited,
    ServerError,
    StreamInterrupted,
    classify,
)
from nbagent.providers import ModelRequest, TextPart, ThinkingPart, ToolCallPart, ToolSpec
from nbagent.providers._gemini import GeminiProvider
from nbagent.providers._gemini_body import SIGNATURE_STANDIN, build_gemini_body
from nbagent.providers._google_rpc import google_details, seconds_to_reset

TEXT = "pydantic-ai__gemini-stream-text.txt"
PARALLEL = "fantasy__gemini-stream-parallel-function-calls.txt"
THINKING = "fantasy__gemini-stream-thinking-function-call.txt"
MAX_TOKENS = "mirascope__gemini-stream-max-tokens.txt"
SAFETY = "pydantic-ai__gemini-finish-safety.txt"
BLOCKED = "pydantic-ai__vertex-prompt-blocked.txt"
PER_MINUTE = "mes-knowledge-base__gemini-429-per-minute.txt"
PER_DAY = "mes-knowledge-base__gemini-429-per-day.txt"
LIMIT_ZERO = "mes-knowledge-base__gemini-429-limit-zero-three-quotas.txt"
HIGH_DEMAND = "mes-knowledge-base__gemini-503-high-demand.txt"
KEY_INVALID = "mirascope__gemini-400-api-key-invalid.txt"
JSON = {"content-type": "application/json"}


def make(model: str = "gemini-2.5-flash", **kw: Any) -> Any:
    def factory(client: httpx.AsyncClient) -> GeminiProvider:
        return GeminiProvider(model, api_key=SENTINEL_KEY, client=client, **kw)

    return factory


def sse(*chunks: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)


def chunk(parts: list[dict[str, Any]], finish: str | None = None, **usage: int) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 10, **usage},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp1",
    }


# -- recorded streams --------------------------------------------------------------------------


def test_text_stream_fixture() -> None:
    served = run(make(), respond(vcr_body_string(TEXT)))
    done = served.completed
    (text,) = done.message.blocks
    assert isinstance(text, TextBlock)
    assert "".join(p.text for p in served.parts if isinstance(p, TextPart)) == text.text
    assert done.stop_reason == "end_turn"
    last_chunk = json.loads(vcr_body_string(TEXT).split("data: ")[-1])
    last = last_chunk["usageMetadata"]
    assert done.usage.input_tokens == last["promptTokenCount"]  # the latest chunk's count
    assert done.usage.output_tokens == last["candidatesTokenCount"] + last.get(
        "thoughtsTokenCount", 0
    )
    assert done.model == last_chunk["modelVersion"]
    assert done.usage.cost_usd is not None and done.usage.cost_usd > 0


def test_parallel_function_calls_arrive_whole_in_one_chunk() -> None:
    served = run(make(), respond(govcr_body(PARALLEL, 0)))
    done = served.completed
    sig, add, mul = done.message.blocks
    recorded = json.loads(govcr_body(PARALLEL, 0).removeprefix("data: "))
    first_part = recorded["candidates"][0]["content"]["parts"][0]
    assert sig == OpaqueBlock("gemini", {"thoughtSignature": first_part["thoughtSignature"]})
    assert isinstance(add, ToolUseBlock) and isinstance(mul, ToolUseBlock)
    assert (add.name, add.input) == ("add", {"b": 3, "a": 2})
    assert (mul.name, mul.input) == ("multiply", {"a": 2, "b": 3})
    assert add.id != mul.id
    calls = [p for p in served.parts if isinstance(p, ToolCallPart)]
    assert [(c.index, c.name) for c in calls] == [(0, "add"), (1, "multiply")]
    assert json.loads(calls[0].arguments) == {"b": 3, "a": 2}
    assert done.stop_reason == "tool_use"
    # thinking is billed as output: 36 candidate tokens + 38 thought tokens
    assert (done.usage.input_tokens, done.usage.output_tokens) == (121, 74)


def test_thought_signature_goes_back_byte_exact_in_the_part_it_came_in() -> None:
    done = run(make(), respond(govcr_body(PARALLEL, 0))).completed
    add, mul = done.message.tool_uses
    results = Message(
        "user",
        (ToolResultBlock(add.id, (TextBlock("5"),)), ToolResultBlock(mul.id, (TextBlock("6"),))),
    )
    body = build_gemini_body(
        "gemini-2.5-flash", ModelRequest((Message.user("Add and multiply"), done.message, results))
    )
    sent = body["contents"][1]
    recorded = govcr_request(PARALLEL, 1)["contents"][1]  # what the SDK sent, and Gemini took
    assert sent["role"] == recorded["role"] == "model"
    assert [p.get("thoughtSignature") for p in sent["parts"]] == [
        p.get("thoughtSignature") for p in recorded["parts"]
    ]
    assert [p["functionCall"]["name"] for p in sent["parts"]] == ["add", "multiply"]
    assert [p["functionCall"]["args"] for p in sent["parts"]] == [
        p["functionCall"]["args"] for p in recorded["parts"]
    ]
    responses = body["contents"][2]["parts"]
    assert responses == [
        {"functionResponse": {"id": add.id, "name": "add", "response": {"output": "5"}}},
        {"functionResponse": {"id": mul.id, "name": "multiply", "response": {"output": "6"}}},
    ]
    answer = run(make(), respond(govcr_body(PARALLEL, 1))).completed
    assert answer.message.text == "The sum of 2 and 3 is 5. The product of 2 and 3 is 6."


def test_thinking_then_signed_call_fixture() -> None:
    served = run(make(), respond(govcr_body(THINKING, 0)))
    done = served.completed
    thought, sig, call = done.message.blocks
    assert isinstance(thought, ThinkingBlock)
    assert thought.thinking.startswith("**Determining the Weather Inquiry**")
    streamed = "".join(p.text for p in served.parts if isinstance(p, ThinkingPart))
    assert streamed == thought.thinking
    assert isinstance(call, ToolUseBlock) and call.input == {"location": "Florence, Italy"}
    body = build_gemini_body("gemini-2.5-flash", ModelRequest((Message.user("w"), done.message)))
    recorded = govcr_request(THINKING, 1)["contents"][1]["parts"]
    (part,) = body["contents"][1]["parts"]  # the thought summary is not sent back, as recorded
    assert isinstance(sig, OpaqueBlock)
    assert (
        part["thoughtSignature"] == recorded[0]["thoughtSignature"] == sig.data["thoughtSignature"]
    )
    answer = run(make(), respond(govcr_body(THINKING, 1))).completed
    assert answer.message.text and answer.stop_reason == "end_turn"


def test_max_tokens_fixture_takes_the_length_path() -> None:
    done = run(make(), respond(vcr_body_string(MAX_TOKENS))).completed
    assert done.stop_reason == "max_tokens"
    assert done.message.text == "Here are all 50 U.S."
    assert done.usage.output_tokens == 10 + 38


def test_safety_finish_fixture_is_content_filtered() -> None:
    err = run(make(), respond(sse(vcr_parsed_body(SAFETY)))).error
    assert isinstance(err, ContentFiltered)
    assert err.code == "SAFETY" and "SAFETY" in str(err)
    assert classify(err) is Action.FAIL


def test_prompt_block_fixture_is_content_filtered() -> None:
    err = run(make(), respond(sse(vcr_parsed_body(BLOCKED)))).error
    assert isinstance(err, ContentFiltered)
    assert err.code == "MODEL_ARMOR"
    assert "Prompt Injection and Jailbreak" in err.message
    assert classify(err) is Action.FAIL


# -- recorded errors ---------------------------------------------------------------------------


def served_error(name: str, **kw: Any) -> Any:
    status, body = run_log_error(name)
    return run(make(**kw), respond(body, status=status, headers=JSON)).error


def test_per_minute_429_is_rate_limited_with_the_bodys_retry_delay() -> None:
    err = served_error(PER_MINUTE)
    assert isinstance(err, RateLimited) and not isinstance(err, QuotaExceeded)
    assert err.retry_after == 58.0  # RetryInfo.retryDelay, honoured like Retry-After
    assert err.status_code == 429 and err.code == "RESOURCE_EXHAUSTED"
    assert classify(err) is Action.RETRY


def test_per_day_429_is_final_with_a_sentence_naming_quota_model_and_reset() -> None:
    err = served_error(PER_DAY)
    assert isinstance(err, QuotaExceeded)
    assert classify(err) is Action.FAIL  # the 48 s retryDelay that came with it is ignored
    text = str(err)
    assert "GenerateRequestsPerDayPerProjectPerModel-FreeTier" in text
    assert "gemini-3-flash" in text and "20 requests a day" in text
    assert "midnight Pacific time" in text
    assert err.retry_after is not None and err.retry_after != 48.0


def test_daily_reset_is_the_next_pacific_midnight() -> None:
    # 2026-01-15 07:00 UTC is 23:00 the evening before in Los Angeles (PST, UTC-8)
    assert seconds_to_reset(1768460400.0) == pytest.approx(3600.0)
    details = google_details(json.loads(run_log_error(PER_DAY)[1])["error"])
    sentence = details.quota_sentence("gemini-3-flash", now_wall=1768460400.0)
    assert sentence.endswith("in 1 h.")


def test_a_zero_quota_is_final_and_says_waiting_will_not_help() -> None:
    err = served_error(LIMIT_ZERO)
    assert isinstance(err, QuotaExceeded)
    assert "is 0 for gemini-2.0-flash" in str(err) and "waiting will not help" in str(err)
    assert classify(err) is Action.FAIL


def test_503_high_demand_is_overloaded() -> None:
    err = served_error(HIGH_DEMAND)
    assert isinstance(err, Overloaded)
    assert "high demand" in err.message
    assert classify(err) is Action.RETRY


def test_api_key_invalid_400_is_auth_failed() -> None:
    interaction = vcr_interaction(KEY_INVALID)
    body = gzip.decompress(interaction["response"]["body"]["string"])
    err = run(make(), respond(body, status=400, headers=JSON)).error
    assert isinstance(err, AuthFailed)
    assert err.code == "API_KEY_INVALID"
    assert classify(err) is Action.FAIL
    assert SENTINEL_KEY not in str(err)


def google_error(code: int, status: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message, "status": status}})


@pytest.mark.parametrize(
    ("code", "status", "cls"),
    [
        (403, "PERMISSION_DENIED", AuthFailed),
        (404, "NOT_FOUND", ModelNotFound),
        (500, "INTERNAL", ServerError),
        (504, "DEADLINE_EXCEEDED", ServerError),
    ],
)
def test_documented_statuses(code: int, status: str, cls: type[Exception]) -> None:
    body = google_error(code, status, "documented")
    err = run(make(), respond(body, status=code, headers=JSON)).error
    assert type(err) is cls


class SmallWindow(GeminiProvider):
    def window(self) -> int:
        return 1000


def test_a_500_for_a_request_larger_than_the_window_is_context_overflow() -> None:
    body = google_error(500, "INTERNAL", "An internal error has occurred.")
    small = ModelRequest((Message.user("short"),))
    big = ModelRequest((Message.user("word " * 2000),))

    def factory(client: httpx.AsyncClient) -> GeminiProvider:
        return SmallWindow("gemini-x", api_key=SENTINEL_KEY, client=client)

    assert isinstance(
        run(factory, respond(body, status=500, headers=JSON), small).error, ServerError
    )
    err = run(factory, respond(body, status=500, headers=JSON), big).error
    assert isinstance(err, ContextOverflow)
    assert err.limit == 1000 and err.tokens is not None and err.tokens > 1000
    assert classify(err) is Action.COMPACT


def test_400_token_count_overflow_names_both_numbers() -> None:
    message = (
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    )
    err = run(make(), respond(google_error(400, "INVALID_ARGUMENT", message), status=400)).error
    assert isinstance(err, ContextOverflow)
    assert (err.tokens, err.limit) == (1200000, 1048576)


# -- stream shapes -----------------------------------------------------------------------------


def test_malformed_function_call_gets_another_attempt() -> None:
    body = sse(chunk([], "MALFORMED_FUNCTION_CALL"))
    err = run(make(), respond(body)).error
    assert isinstance(err, StreamInterrupted) and err.code == "MALFORMED_FUNCTION_CALL"
    assert classify(err) is Action.RETRY


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [("UNAVAILABLE", 503, Overloaded), ("INTERNAL", 500, StreamInterrupted)],
)
def test_midstream_error_chunk(status: str, code: int, cls: type[Exception]) -> None:
    body = sse(
        chunk([{"text": "Hel"}]), {"error": {"code": code, "message": "x", "status": status}}
    )
    served = run(make(), respond(body))
    assert type(served.error) is cls
    assert [p.text for p in served.parts if isinstance(p, TextPart)] == ["Hel"]


def test_a_stream_without_a_finish_reason_broke() -> None:
    err = run(make(), respond(sse(chunk([{"text": "Hel"}])))).error
    assert isinstance(err, StreamInterrupted) and "finishReason" in err.message


def test_cached_tokens_are_cache_reads() -> None:
    body = sse(chunk([{"text": "ok"}], "STOP", cachedContentTokenCount=8, candidatesTokenCount=1))
    usage = run(make(), respond(body)).completed.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (10, 8, 1)


def test_a_signature_on_an_empty_last_part_is_kept_whole() -> None:
    body = sse(
        chunk([{"text": "Hello"}]),
        chunk([{"text": " there"}, {"text": "", "thoughtSignature": "c2ln"}], "STOP"),
    )
    done = run(make(), respond(body)).completed
    assert done.message.blocks == (
        TextBlock("Hello there"),
        OpaqueBlock("gemini", {"text": "", "thoughtSignature": "c2ln"}),
    )
    sent = build_gemini_body("gemini-3-pro", ModelRequest((Message.user("q"), done.message)))
    assert sent["contents"][1]["parts"] == [
        {"text": "Hello there"},
        {"text": "", "thoughtSignature": "c2ln"},
    ]


# -- the request -------------------------------------------------------------------------------


def test_request_url_headers_and_body() -> None:
    req = ModelRequest(
        (
            Message.user("Look:"),
            Message("assistant", (ToolUseBlock("toolu_1", "calc", {"expr": "2+2"}),)),
            Message(
                "user",
                (
                    ToolResultBlock("toolu_1", (TextBlock("bad"), ImageBlock("aGk=")), True),
                    TextBlock("and?"),
                ),
            ),
        ),
        system="Be brief.",
        tools=(ToolSpec("calc", "Evaluate.", {"type": "object", "properties": {}}),),
        max_tokens=321,
        options={"temperature": 0.2, "safetySettings": [{"category": "X"}]},
    )
    served = run(make("gemini-2.5-flash"), respond(sse(chunk([{"text": "ok"}], "STOP"))), req)
    (sent,) = served.requests
    assert str(sent.url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/"
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert sent.headers["x-goog-api-key"] == SENTINEL_KEY
    assert SENTINEL_KEY not in str(sent.url)
    body = served.body
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["generationConfig"] == {"temperature": 0.2, "maxOutputTokens": 321}
    assert body["safetySettings"] == [{"category": "X"}]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "calc",
                    "description": "Evaluate.",
                    "parametersJsonSchema": {"type": "object", "properties": {}},
                }
            ]
        }
    ]
    # a 2.5 model takes a history without signatures: no stand-in
    assert body["contents"][1] == {
        "role": "model",
        "parts": [{"functionCall": {"id": "toolu_1", "name": "calc", "args": {"expr": "2+2"}}}],
    }
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"id": "toolu_1", "name": "calc", "response": {"error": "bad"}}},
        {"text": "and?"},
        {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
    ]


def test_calls_from_another_provider_get_the_stand_in_signature_on_gemini_3() -> None:
    history = (
        Message.user("q"),
        Message(
            "assistant",
            (
                ThinkingBlock("anthropic thinking", "anthropic-signature"),
                ToolUseBlock("a", "f", {}),
                ToolUseBlock("b", "f", {}),
            ),
        ),
    )
    parts = build_gemini_body("gemini-3-pro-preview", ModelRequest(history))["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == [SIGNATURE_STANDIN, None]
    assert "anthropic-signature" not in json.dumps(parts)
    parts = build_gemini_body("gemini-2.5-pro", ModelRequest(history))["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == [None, None]


def test_other_providers_state_is_not_sent_to_gemini() -> None:
    history = (
        Message.user("q"),
        Message(
            "assistant",
            (OpaqueBlock("openai-responses", {"type": "reasoning"}), TextBlock("hi")),
        ),
    )
    parts = build_gemini_body("gemini-3-pro", ModelRequest(history))["contents"][1]["parts"]
    assert parts == [{"text": "hi"}]


def test_base_url_forms_and_repr() -> None:
    p = GeminiProvider("gemini-x", api_key=SENTINEL_KEY, base_url="http://127.0.0.1:9/v1beta")
    assert p.url == "http://127.0.0.1:9/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    p = GeminiProvider("models/gemini-x", api_key=SENTINEL_KEY, base_url="http://127.0.0.1:9")
    assert p.url == "http://127.0.0.1:9/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    assert SENTINEL_KEY not in repr(p)


def test_sse_header_is_required() -> None:
    err = run(make(), respond('{"candidates": []}', headers={**SSE, "content-type": "text/html"}))
    assert err.error is not None
