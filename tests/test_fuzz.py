"""Fuzzing: whatever a server or a file holds, nbagent raises only its own typed errors.

Hypothesis drives the SSE parsers of both wire formats (random bytes, split at random chunk
boundaries, and random but well-formed event sequences), the HTTP error classifier (any status,
body and headers), the server-wish parsers (Retry-After, reset headers, durations) and the
session loader (any bytes, and JSON shaped almost like a session). Each must return or raise an
`NbAgentError`, never anything else, and never hang (a wall-clock limit per example).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import tempfile
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent._core._messages import Message, load_session, repair_tool_pairing
from nbagent.errors import (
    Action,
    NbAgentError,
    ProviderError,
    SessionFileError,
    ToolPairingError,
    classify,
)
from nbagent.providers._anthropic import AnthropicProvider
from nbagent.providers._base import Completed, ModelRequest
from nbagent.providers._gemini import GeminiProvider
from nbagent.providers._http_errors import error_from_payload, error_from_response
from nbagent.providers._openai_chat import OpenAIProvider
from nbagent.providers._openai_responses import ResponsesProvider
from nbagent.providers._server_wish import parse_duration, parse_retry_after, server_wish

FUZZ = settings(
    max_examples=int(os.environ.get("NBAGENT_FUZZ_EXAMPLES", "150")),
    deadline=timedelta(seconds=3),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HANG_S = 5.0  # an example that takes longer than this in real time is a hang

# -- strategies ----------------------------------------------------------------------------------

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)


def _nest(inner: Any) -> Any:
    return st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    )


json_value = st.recursive(json_leaf, _nest, max_leaves=12)
# header names and values that HTTP can carry (no CR/LF, latin-1)
header_name = st.one_of(
    st.sampled_from(
        [
            "retry-after",
            "retry-after-ms",
            "x-should-retry",
            "request-id",
            "x-request-id",
            "anthropic-ratelimit-requests-reset",
            "anthropic-ratelimit-requests-remaining",
            "anthropic-ratelimit-tokens-reset",
            "anthropic-ratelimit-tokens-remaining",
            "x-ratelimit-reset-requests",
            "x-ratelimit-remaining-requests",
            "x-ratelimit-reset-tokens",
            "x-ratelimit-remaining-tokens",
            "content-type",
            "location",
        ]
    ),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
)
header_value = st.one_of(
    st.sampled_from(
        [
            "0",
            "1",
            "-3",
            "1.5",
            "nan",
            "inf",
            "1e400",
            "true",
            "false",
            "6m0s",
            "1h2m3.5s",
            "12ms",
            "2024-01-01T00:00:00Z",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00+23:59",
            "",
        ]
    ),
    st.text(
        alphabet=st.characters(min_codepoint=32, max_codepoint=255, blacklist_characters="\x7f"),
        max_size=40,
    ),
)
headers_st = st.dictionaries(header_name, header_value, max_size=6)
status_st = st.one_of(
    st.sampled_from(
        [
            200,
            201,
            204,
            301,
            302,
            400,
            401,
            402,
            403,
            404,
            408,
            409,
            413,
            422,
            425,
            429,
            500,
            502,
            503,
            504,
            529,
        ]
    ),
    st.integers(min_value=-5, max_value=1200),
)
error_words = st.sampled_from(
    [
        "prompt is too long: 205429 tokens > 200000 maximum",
        "context_length_exceeded",
        "insufficient_quota",
        "overloaded_error",
        "rate_limit_error",
        "content_filter",
        "credit balance is too low",
        "maximum context length is 8192 tokens",
        "not_found_error",
        "invalid_api_key",
        "billing_error",
        "api_error",
        "refusal",
        "",
    ]
)
error_body = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.builds(
        lambda code, etype, msg, extra: json.dumps(
            {"error": {"code": code, "type": etype, "message": msg, **extra}}
        ).encode(),
        st.one_of(error_words, st.integers(-1000, 1000), json_value),
        st.one_of(error_words, json_value),
        st.one_of(error_words, st.text(max_size=60)),
        st.dictionaries(
            st.sampled_from(["metadata", "details", "n_prompt_tokens", "n_ctx", "request_id"]),
            json_value,
            max_size=3,
        ),
    ),
    json_value.map(lambda v: json.dumps(v).encode()),
)


# -- a provider over a scripted HTTP exchange -----------------------------------------------------


class Split(httpx.AsyncByteStream):
    """A body sent in the chunks given (the SSE parser must not care where they break)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c

    async def aclose(self) -> None:
        return None


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


WIRES: dict[str, tuple[Any, str]] = {
    "anthropic": (AnthropicProvider, "claude-x"),
    "openai": (OpenAIProvider, "gpt-x"),
    "gemini": (GeminiProvider, "gemini-x"),
    "responses": (ResponsesProvider, "o4-mini"),
}


def stream_through(
    fmt: str,
    status: int,
    headers: dict[str, str],
    chunks: list[bytes],
) -> tuple[list[Any], BaseException | None]:
    """Stream one request through a provider against the given response."""
    parts: list[Any] = []
    error: BaseException | None = None

    def handler(request: httpx.Request) -> httpx.Response:
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        return httpx.Response(status, headers=raw, stream=Split(chunks))

    async def main() -> None:
        nonlocal error
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            wire, model = WIRES[fmt]
            provider = wire(model, api_key="sk-fuzz-key", client=client, idle_timeout=1.0)
            req = ModelRequest((Message.user("hi"),))

            async def consume() -> None:
                async for part in provider.stream(req):
                    parts.append(part)

            try:
                await asyncio.wait_for(consume(), HANG_S)
            except asyncio.TimeoutError as exc:
                raise AssertionError(f"the {fmt} parser hung") from exc
            except NbAgentError as exc:
                error = exc

    asyncio.run(main())
    return parts, error


def check_stream_outcome(parts: list[Any], error: BaseException | None) -> None:
    completed = [p for p in parts if isinstance(p, Completed)]
    if error is None:
        assert len(completed) == 1 and parts[-1] is completed[0], "no single final message"
    else:
        assert not completed, "an error after the final message"
        assert isinstance(error, ProviderError) or type(error).__name__ == "ConfigError"
        assert classify(error) in set(Action)
        str(error), repr(error)
        assert "sk-fuzz-key" not in str(error) + repr(error)


SSE_HEADERS = {"content-type": "text/event-stream"}


@FUZZ
@given(
    fmt=st.sampled_from(list(WIRES)),
    body=st.binary(max_size=400),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_sse_parsers_survive_any_bytes(fmt: str, body: bytes, cuts: list[int]) -> None:
    parts, error = stream_through(fmt, 200, SSE_HEADERS, split(body, cuts))
    check_stream_outcome(parts, error)


def _anthropic_event(draw: Any) -> str:
    kind = draw(
        st.sampled_from(
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
                "ping",
                "error",
                "mystery",
            ]
        )
    )
    data: dict[str, Any] = {"type": kind}
    if kind == "message_start":
        data["message"] = draw(
            st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {
                        "model": st.one_of(st.text(max_size=8), json_leaf),
                        "usage": st.dictionaries(
                            st.sampled_from(
                                ["input_tokens", "output_tokens", "cache_read_input_tokens"]
                            ),
                            json_leaf,
                            max_size=3,
                        ),
                    }
                ),
            )
        )
    elif kind == "content_block_start":
        data["index"] = draw(st.one_of(st.integers(-1, 3), json_leaf))
        data["content_block"] = draw(
            st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(["text", "thinking", "tool_use", "image", "x"]),
                        "text": st.one_of(st.text(max_size=10), json_leaf),
                        "id": json_leaf,
                        "name": json_leaf,
                        "input": json_value,
                    }
                ),
            )
        )
    elif kind == "content_block_delta":
        data["index"] = draw(st.one_of(st.integers(-1, 3), json_leaf))
        data["delta"] = draw(
            st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(
                            [
                                "text_delta",
                                "thinking_delta",
                                "signature_delta",
                                "input_json_delta",
                                "x",
                            ]
                        ),
                        "text": st.one_of(st.text(max_size=10), json_leaf),
                        "thinking": json_leaf,
                        "signature": json_leaf,
                        "partial_json": st.one_of(
                            st.sampled_from(['{"a":', "1}", "{}"]), json_leaf
                        ),
                    }
                ),
            )
        )
    elif kind == "message_delta":
        data["delta"] = draw(
            st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {
                        "stop_reason": st.one_of(
                            st.sampled_from(
                                [
                                    "end_turn",
                                    "tool_use",
                                    "max_tokens",
                                    "refusal",
                                    "pause_turn",
                                    "weird",
                                ]
                            ),
                            json_leaf,
                        )
                    }
                ),
            )
        )
        data["usage"] = draw(json_value)
    elif kind == "error":
        data["error"] = draw(
            st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {"type": error_words, "message": st.one_of(error_words, json_leaf)}
                ),
            )
        )
    text = draw(st.sampled_from(["json", "json", "json", "garbage"]))
    payload = json.dumps(data) if text == "json" else draw(st.text(max_size=20))
    name = draw(st.one_of(st.just(kind), st.sampled_from(["", "error", "ping"])))
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {payload}\n\n"


def _openai_event(draw: Any) -> str:
    roll = draw(st.integers(0, 9))
    if roll == 0:
        return "data: [DONE]\n\n"
    if roll == 1:
        body: Any = {
            "error": draw(
                st.one_of(
                    json_value,
                    st.fixed_dictionaries(
                        {
                            "code": st.one_of(error_words, st.integers(100, 600)),
                            "message": error_words,
                        }
                    ),
                )
            )
        }
    else:
        delta = draw(
            st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {
                        "content": st.one_of(st.text(max_size=10), json_leaf),
                        "reasoning_content": json_leaf,
                        "refusal": st.one_of(st.none(), st.text(max_size=5)),
                        "tool_calls": st.one_of(
                            json_value,
                            st.lists(
                                st.fixed_dictionaries(
                                    {
                                        "index": st.one_of(st.integers(-1, 3), json_leaf),
                                        "id": json_leaf,
                                        "function": st.one_of(
                                            json_value,
                                            st.fixed_dictionaries(
                                                {
                                                    "name": json_leaf,
                                                    "arguments": st.one_of(
                                                        st.sampled_from(['{"a":', "1}", "{}"]),
                                                        json_value,
                                                    ),
                                                }
                                            ),
                                        ),
                                    }
                                ),
                                max_size=3,
                            ),
                        ),
                    }
                ),
            )
        )
        choice = {
            "delta": delta,
            "finish_reason": draw(
                st.one_of(
                    st.none(),
                    st.sampled_from(
                        ["stop", "tool_calls", "length", "content_filter", "error", "x"]
                    ),
                    json_leaf,
                )
            ),
        }
        body = {
            "choices": draw(st.one_of(st.just([choice]), json_value)),
            "model": draw(json_leaf),
            "usage": draw(json_value),
        }
    text = json.dumps(body) if draw(st.integers(0, 5)) else draw(st.text(max_size=20))
    name = draw(st.sampled_from(["", "", "error", "message"]))
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n"


@st.composite
def event_streams(draw: Any, fmt: str) -> bytes:
    make = _anthropic_event if fmt == "anthropic" else _openai_event
    events = [make(draw) for _ in range(draw(st.integers(0, 8)))]
    if draw(st.booleans()):
        events.append(
            'event: message_stop\ndata: {"type": "message_stop"}\n\n'
            if fmt == "anthropic"
            else "data: [DONE]\n\n"
        )
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return "".join(events).replace("\n", newline).encode()


@pytest.mark.slow
@FUZZ
@given(
    data=st.data(),
    fmt=st.sampled_from(["anthropic", "openai"]),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
)
def test_sse_parsers_survive_any_event_sequence(data: Any, fmt: str, cuts: list[int]) -> None:
    body = data.draw(event_streams(fmt))
    parts, error = stream_through(fmt, 200, SSE_HEADERS, split(body, cuts))
    check_stream_outcome(parts, error)


@FUZZ
@given(
    fmt=st.sampled_from(list(WIRES)),
    status=st.sampled_from([200, 400, 401, 403, 404, 429, 500, 503, 529, 302, 204]),
    headers=headers_st,
    body=error_body,
)
def test_any_http_answer_becomes_a_typed_error_or_a_message(
    fmt: str, status: int, headers: dict[str, str], body: bytes
) -> None:
    parts, error = stream_through(fmt, status, headers, [body])
    check_stream_outcome(parts, error)
    if not 200 <= status < 300:
        assert isinstance(error, ProviderError)


# -- the classifier ------------------------------------------------------------------------------


@FUZZ
@given(
    provider=st.sampled_from(["anthropic", "openai", "openrouter", "ollama", "", "x"]),
    status=status_st,
    body=st.one_of(error_body, json_value, st.text(max_size=100)),
    headers=st.dictionaries(st.text(max_size=30), st.text(max_size=40), max_size=6),
)
def test_error_classifier_takes_any_status_body_and_headers(
    provider: str, status: int, body: Any, headers: dict[str, str]
) -> None:
    err = error_from_response(provider, status, body, headers, secrets=("sk-secret-abc",))
    assert isinstance(err, ProviderError)
    assert classify(err) in set(Action)
    assert isinstance(str(err), str) and isinstance(repr(err), str)
    assert err.retry_after is None or (err.retry_after >= 0 and not math.isnan(err.retry_after))


@FUZZ
@given(
    provider=st.sampled_from(["anthropic", "openai", "openrouter"]),
    payload=st.one_of(
        json_value,
        st.builds(lambda e: {"error": e}, json_value),
        st.builds(
            lambda c, t, m: {"type": "error", "error": {"code": c, "type": t, "message": m}},
            st.one_of(error_words, st.integers(-10, 1000), json_leaf),
            st.one_of(error_words, json_leaf),
            st.one_of(error_words, json_leaf),
        ),
    ),
    headers=headers_st,
)
def test_midstream_error_classifier_takes_any_payload(
    provider: str, payload: Any, headers: dict[str, str]
) -> None:
    err = error_from_payload(provider, payload, headers)
    assert isinstance(err, ProviderError)
    assert classify(err) in set(Action)
    str(err), repr(err)


# -- server wishes -------------------------------------------------------------------------------


def _wish_ok(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and value >= 0 and not math.isnan(value))


@FUZZ
@given(
    headers=st.one_of(headers_st, st.dictionaries(st.text(), st.text(), max_size=5)),
    now=st.one_of(st.none(), st.floats(min_value=-1e12, max_value=1e12)),
)
def test_server_wish_takes_any_headers(headers: dict[str, str], now: float | None) -> None:
    assert _wish_ok(server_wish(headers, now))


@FUZZ
@given(
    text=st.one_of(header_value, st.text()),
    now=st.one_of(st.none(), st.floats(min_value=-1e12, max_value=1e12)),
)
def test_retry_after_and_duration_parsers_take_any_text(text: str, now: float | None) -> None:
    assert _wish_ok(parse_retry_after(text, now))
    assert _wish_ok(parse_duration(text))


# -- the session loader --------------------------------------------------------------------------


def _load_bytes(data: bytes, strict: bool) -> None:
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            messages, meta = load_session(path, strict_tool_pairing=strict)
        except SessionFileError as exc:
            assert path in str(exc)
        except ToolPairingError:
            assert strict
        else:
            assert isinstance(meta, dict)
            assert all(isinstance(m, Message) for m in messages)
            assert repair_tool_pairing(messages) == messages  # already paired
    finally:
        os.unlink(path)


@FUZZ
@given(data=st.binary(max_size=500), strict=st.booleans())
def test_session_loader_takes_any_bytes(data: bytes, strict: bool) -> None:
    _load_bytes(data, strict)


block_st = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "thinking", "image", "tool_use", "tool_result", "x"])},
        optional={
            "text": json_leaf,
            "thinking": json_leaf,
            "signature": json_leaf,
            "data": json_leaf,
            "media_type": json_leaf,
            "id": st.one_of(st.sampled_from(["t1", "t2"]), json_leaf),
            "tool_use_id": st.one_of(st.sampled_from(["t1", "t2"]), json_leaf),
            "name": json_leaf,
            "input": json_value,
            "raw_input": json_leaf,
            "content": json_value,
            "is_error": json_leaf,
        },
    ),
)
message_st = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {
            "role": st.one_of(st.sampled_from(["user", "assistant"]), json_leaf),
            "content": st.one_of(st.lists(block_st, max_size=3), json_value),
        }
    ),
)


@FUZZ
@given(
    doc=st.one_of(
        st.lists(message_st, max_size=4),
        st.fixed_dictionaries(
            {
                "format": st.one_of(st.integers(-1, 3), json_leaf),
                "messages": st.one_of(st.lists(message_st, max_size=4), json_value),
            },
            optional={"meta": json_value},
        ),
    ),
    strict=st.booleans(),
)
def test_session_loader_takes_any_session_shaped_json(doc: Any, strict: bool) -> None:
    _load_bytes(json.dumps(doc).encode(), strict)


def test_session_loader_survives_deep_nesting() -> None:
    _load_bytes(b"[" * 100_000 + b"]" * 100_000, False)
    _load_bytes(b'{"messages": [{"role": "user", "content": ' + b"[" * 50_000, False)
