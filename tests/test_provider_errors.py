"""HTTP status / body / headers / mid-stream events -> typed errors (DESIGN's table)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from provider_support import SENTINEL_KEY, SSE, Chunks, respond, run

from nbagent._core._messages import Message
from nbagent.errors import (
    Action,
    AuthFailed,
    BadRequest,
    ConfigError,
    ContentFiltered,
    ContextOverflow,
    InvalidResponse,
    ModelNotFound,
    Overloaded,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    ServerError,
    StreamInterrupted,
    TransportError,
    classify,
)
from nbagent.providers import AnthropicProvider, ModelRequest, OpenAIProvider
from nbagent.providers._error_text import context_numbers, kept_headers
from nbagent.providers._http_errors import error_from_payload, error_from_response
from nbagent.providers._limits import Limits, Sender, transport_error


def anthropic_body(etype: str, message: str = "msg", **extra: Any) -> str:
    error: dict[str, Any] = {"type": etype, "message": message, **extra}
    return json.dumps({"type": "error", "error": error, "request_id": "req_body"})


def openai_body(message: str, etype: str | None, code: Any) -> str:
    return json.dumps({"error": {"message": message, "type": etype, "param": None, "code": code}})


def openrouter_body(code: int, message: str, **metadata: Any) -> str:
    error: dict[str, Any] = {"code": code, "message": message}
    if metadata:
        error["metadata"] = metadata
    return json.dumps({"error": error})


# Every status and code named in tests/fixtures/providers/README.md, and DESIGN's table.
TABLE: list[tuple[str, int, str, type[ProviderError]]] = [
    # Anthropic
    (
        "anthropic",
        400,
        anthropic_body("invalid_request_error", "messages: field required"),
        BadRequest,
    ),
    (
        "anthropic",
        400,
        anthropic_body(
            "invalid_request_error", "prompt is too long: 203042 tokens > 200000 maximum"
        ),
        ContextOverflow,
    ),
    ("anthropic", 401, anthropic_body("authentication_error", "invalid x-api-key"), AuthFailed),
    ("anthropic", 402, anthropic_body("billing_error", "credit balance too low"), QuotaExceeded),
    ("anthropic", 403, anthropic_body("permission_error", "no access"), AuthFailed),
    ("anthropic", 404, anthropic_body("not_found_error", "model: claude-nope"), ModelNotFound),
    (
        "anthropic",
        413,
        anthropic_body("request_too_large", "Request exceeds the maximum size"),
        BadRequest,
    ),
    (
        "anthropic",
        429,
        anthropic_body("rate_limit_error", "Number of requests has exceeded"),
        RateLimited,
    ),
    (
        "anthropic",
        429,
        anthropic_body(
            "rate_limit_error",
            "You have reached your specified API usage limits.",
            details={"error_code": "enforced_spend_limit_reached"},
        ),
        QuotaExceeded,
    ),
    (
        "anthropic",
        400,
        anthropic_body(
            "invalid_request_error", "Your credit balance is too low to access the API."
        ),
        QuotaExceeded,
    ),
    ("anthropic", 500, anthropic_body("api_error", "Internal server error"), ServerError),
    ("anthropic", 504, anthropic_body("timeout_error", "Request timeout"), ServerError),
    ("anthropic", 529, anthropic_body("overloaded_error", "Overloaded"), Overloaded),
    ("anthropic", 500, anthropic_body("overloaded_error", "Overloaded"), Overloaded),
    # OpenAI
    (
        "openai",
        400,
        openai_body(
            "This model's maximum context length is 8192 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        ContextOverflow,
    ),
    (
        "openai",
        429,
        openai_body("Rate limit reached for gpt-4o", "tokens", "rate_limit_exceeded"),
        RateLimited,
    ),
    (
        "openai",
        429,
        openai_body("You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
        QuotaExceeded,
    ),
    (
        "openai",
        401,
        openai_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
        AuthFailed,
    ),
    (
        "openai",
        404,
        openai_body("The model `gpt-9` does not exist", "invalid_request_error", "model_not_found"),
        ModelNotFound,
    ),
    (
        "openai",
        400,
        openai_body("Invalid value for 'temperature'", "invalid_request_error", None),
        BadRequest,
    ),
    (
        "openai",
        400,
        openai_body("flagged by our safety system", "invalid_request_error", "content_filter"),
        ContentFiltered,
    ),
    ("openai", 408, openai_body("Request timed out", None, None), ServerError),
    ("openai", 409, openai_body("Conflict", None, None), ServerError),
    ("openai", 425, openai_body("Too early", None, None), ServerError),
    ("openai", 502, "<html><head><title>502 Bad Gateway</title></head></html>", ServerError),
    (
        "openai",
        503,
        openai_body("The engine is currently overloaded", "server_error", None),
        ServerError,
    ),
    ("openai", 422, openai_body("Unprocessable", None, None), BadRequest),
    # OpenRouter: numeric codes equal to the status
    ("openrouter", 402, openrouter_body(402, "Insufficient credits"), QuotaExceeded),
    (
        "openrouter",
        429,
        openrouter_body(429, "Provider returned error", raw="rate-limited upstream"),
        RateLimited,
    ),
    ("openrouter", 401, openrouter_body(401, "No auth credentials found"), AuthFailed),
    (
        "openrouter",
        403,
        openrouter_body(403, "Input was flagged", reasons=["violence"], flagged_input="x"),
        ContentFiltered,
    ),
    ("openrouter", 400, openrouter_body(400, "Invalid model"), BadRequest),
    ("openrouter", 502, openrouter_body(502, "Provider unavailable"), ServerError),
    # llama.cpp
    (
        "openai",
        400,
        json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 9000,
                    "n_ctx": 8192,
                }
            }
        ),
        ContextOverflow,
    ),
    # Ollama
    (
        "ollama",
        404,
        openai_body('model "llama9" not found, try pulling it first', "api_error", None),
        ModelNotFound,
    ),
    (
        "ollama",
        503,
        openai_body(
            "server busy, please try again.  maximum pending requests exceeded", "api_error", None
        ),
        ServerError,
    ),
    ("ollama", 500, json.dumps({"error": "llama runner process has terminated"}), ServerError),
    # vLLM's top-level error object
    (
        "openai",
        400,
        json.dumps(
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
                "type": "BadRequestError",
                "code": 400,
            }
        ),
        ContextOverflow,
    ),
    # no body at all
    ("openai", 500, "", ServerError),
    ("openai", 418, "", BadRequest),
    ("openai", 301, "", BadRequest),
]


@pytest.mark.parametrize(("provider", "status", "body", "cls"), TABLE)
def test_status_and_code_table(
    provider: str, status: int, body: str, cls: type[ProviderError]
) -> None:
    err = error_from_response(provider, status, body.encode(), {})
    assert type(err) is cls, (err, body)
    assert err.status_code == status
    assert err.provider == provider
    assert err.message  # never empty: the provider's own message or the HTTP reason
    if cls is ContextOverflow:
        assert classify(err) is Action.COMPACT


def test_the_table_goes_through_the_real_provider_code() -> None:
    """A sample of the table served over MockTransport, through AnthropicProvider.stream."""
    for _provider, status, body, cls in TABLE[:14]:
        served = run(
            lambda c: AnthropicProvider("m", api_key=SENTINEL_KEY, client=c),
            respond(body, status=status, headers={"content-type": "application/json"}),
        )
        assert type(served.error) is cls, body


def test_messages_are_the_providers_own() -> None:
    err = error_from_response(
        "anthropic",
        400,
        anthropic_body(
            "invalid_request_error", "prompt is too long: 203042 tokens > 200000 maximum"
        ),
        {},
    )
    assert err.message == "prompt is too long: 203042 tokens > 200000 maximum"
    assert str(err).startswith(
        "Anthropic: context window exceeded (HTTP 400, invalid_request_error)"
    )
    html = error_from_response("openai", 502, b"<html><title>502 Bad Gateway</title></html>", {})
    assert html.message == "502 Bad Gateway"
    empty = error_from_response("openai", 503, b"", {})
    assert empty.message == "Service Unavailable"


@pytest.mark.parametrize(
    ("message", "tokens", "limit"),
    [
        ("prompt is too long: 205429 tokens > 200000 maximum", 205429, 200000),
        (
            "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in "
            "3148588 tokens. Please reduce the length of the messages.",
            3148588,
            272000,
        ),
        (
            "This model's maximum context length is 8192 tokens. However, your messages resulted "
            "in 9013 tokens. Please reduce the length of the messages.",
            9013,
            8192,
        ),
        (
            "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",
            9000,
            8192,
        ),
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
            5000,
            4096,
        ),
        ("too many tokens", None, None),
    ],
)
def test_context_numbers(message: str, tokens: int | None, limit: int | None) -> None:
    assert context_numbers(message) == (tokens, limit)


def test_llama_cpp_fields_give_the_numbers() -> None:
    body = json.dumps(
        {
            "error": {
                "code": 400,
                "message": "context exceeded",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 11,
                "n_ctx": 10,
            }
        }
    )
    err = error_from_response("openai", 400, body, {})
    assert isinstance(err, ContextOverflow)
    assert (err.tokens, err.limit) == (11, 10)


# -- headers -----------------------------------------------------------------------------------


def test_x_should_retry_overrides_the_table() -> None:
    no = error_from_response(
        "anthropic", 500, anthropic_body("api_error"), {"x-should-retry": "false"}
    )
    assert isinstance(no, ServerError) and no.should_retry is False
    assert classify(no) is Action.FAIL
    yes = error_from_response(
        "anthropic", 400, anthropic_body("invalid_request_error"), {"X-Should-Retry": "true"}
    )
    assert yes.should_retry is True
    assert classify(yes) is Action.RETRY
    neither = error_from_response(
        "anthropic", 500, anthropic_body("api_error"), {"x-should-retry": "maybe"}
    )
    assert neither.should_retry is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"}, 360.0),
        ({"x-ratelimit-remaining-tokens": "10", "x-ratelimit-reset-tokens": "12ms"}, None),
        ({}, None),
    ],
)
def test_retry_after_from_headers(headers: dict[str, str], seconds: float | None) -> None:
    err = error_from_response(
        "openai", 429, openai_body("slow down", "requests", "rate_limit_exceeded"), headers
    )
    assert isinstance(err, RateLimited)
    assert err.retry_after == seconds


def test_retry_after_from_anthropic_reset_header() -> None:
    headers = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2999-01-01T00:00:00Z",
    }
    err = error_from_response("anthropic", 429, anthropic_body("rate_limit_error"), headers)
    assert err.retry_after is not None and err.retry_after > 1e6


def test_retry_after_through_the_provider() -> None:
    served = run(
        lambda c: OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=c),
        respond(
            openai_body("slow down", "requests", "rate_limit_exceeded"),
            status=429,
            headers={
                "content-type": "application/json",
                "retry-after": "3",
                "x-request-id": "req_9",
            },
        ),
    )
    err = served.error
    assert isinstance(err, RateLimited)
    assert err.retry_after == 3.0
    assert err.request_id == "req_9"
    assert err.headers == {"retry-after": "3", "x-request-id": "req_9"}


@pytest.mark.parametrize(
    ("headers", "body", "rid"),
    [
        ({"request-id": "req_a"}, anthropic_body("api_error"), "req_a"),
        ({"x-request-id": "req_b"}, openai_body("x", None, None), "req_b"),
        ({}, anthropic_body("api_error"), "req_body"),
        ({}, openai_body("x", None, None), None),
    ],
)
def test_request_ids(headers: dict[str, str], body: str, rid: str | None) -> None:
    assert error_from_response("anthropic", 500, body, headers).request_id == rid


def test_only_retry_headers_are_kept() -> None:
    headers = {
        "Retry-After": "1",
        "retry-after-ms": "1000",
        "anthropic-ratelimit-tokens-remaining": "0",
        "x-ratelimit-limit-requests": "60",
        "x-should-retry": "true",
        "request-id": "req_1",
        "x-request-id": "req_2",
        "authorization": f"Bearer {SENTINEL_KEY}",
        "x-api-key": SENTINEL_KEY,
        "set-cookie": "session=abc",
        "content-type": "application/json",
        "server": "cloudflare",
    }
    kept = kept_headers(headers)
    assert set(kept) == {
        "retry-after",
        "retry-after-ms",
        "anthropic-ratelimit-tokens-remaining",
        "x-ratelimit-limit-requests",
        "x-should-retry",
        "request-id",
        "x-request-id",
    }
    err = error_from_response("openai", 429, b"", headers)
    assert err.headers == kept


# -- mid-stream ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "cls"),
    [
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            Overloaded,
        ),
        (
            {"type": "error", "error": {"type": "api_error", "message": "Overloaded"}},
            StreamInterrupted,
        ),
        ({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}, RateLimited),
        (
            {"type": "error", "error": {"type": "invalid_request_error", "message": "odd"}},
            StreamInterrupted,
        ),
        (
            {"error": {"message": "The server had an error", "type": "server_error"}},
            StreamInterrupted,
        ),
        (
            {"error": {"message": "slow", "type": "requests", "code": "rate_limit_exceeded"}},
            RateLimited,
        ),
        ({"error": {"message": "no quota", "code": "insufficient_quota"}}, QuotaExceeded),
        ({"error": {"code": 429, "message": "Rate limited"}}, RateLimited),
        ({"error": {"code": "429", "message": "Rate limited"}}, RateLimited),
        ({"error": {"code": 500, "message": "Internal"}}, StreamInterrupted),
        ({"error": {"code": 400, "message": "Token limit reached"}}, StreamInterrupted),
        ({"error": {"code": 529, "message": "busy"}}, Overloaded),
        (
            {"error": {"code": 403, "message": "flagged", "metadata": {"reasons": ["x"]}}},
            ContentFiltered,
        ),
        ({"error": {"message": "maximum context length is 10 tokens"}}, ContextOverflow),
        ({"error": {}}, StreamInterrupted),
    ],
)
def test_midstream_payloads(payload: dict[str, Any], cls: type[ProviderError]) -> None:
    err = error_from_payload("openrouter", payload, {"x-request-id": "req_m"})
    assert type(err) is cls
    assert err.request_id == "req_m"
    assert err.message


# -- transport ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "after", "cls"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), False, TransportError),
        (httpx.ConnectTimeout("timed out"), False, TransportError),
        (httpx.ReadTimeout("timed out"), False, TransportError),
        (httpx.ReadError("reset"), False, TransportError),
        (httpx.RemoteProtocolError("Server disconnected"), False, TransportError),
        (httpx.WriteError("broken pipe"), False, TransportError),
        (httpx.PoolTimeout("pool"), False, TransportError),
        (httpx.ProxyError("proxy"), False, TransportError),
        (OSError("network unreachable"), False, TransportError),
        (httpx.ReadError("reset"), True, StreamInterrupted),
        (httpx.RemoteProtocolError("peer closed connection"), True, StreamInterrupted),
        (httpx.ReadTimeout("timed out"), True, TransportError),
        (TimeoutError(), True, TransportError),
        (httpx.DecodingError("bad gzip"), True, InvalidResponse),
        (httpx.UnsupportedProtocol("ftp"), False, ConfigError),
    ],
)
def test_transport_errors(exc: Exception, after: bool, cls: type[Exception]) -> None:
    err = transport_error(exc, Sender("openai", Limits(idle_timeout=42.0)), after_response=after)
    assert type(err) is cls
    if isinstance(err, TransportError) and isinstance(exc, (httpx.ReadTimeout, TimeoutError)):
        assert "42 s" in err.message


def test_connect_error_through_the_provider() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    err = run(lambda c: AnthropicProvider("m", api_key=SENTINEL_KEY, client=c), refuse).error
    assert isinstance(err, TransportError)
    assert "Connection refused" in err.message
    assert classify(err) is Action.RETRY


# -- secrets --------------------------------------------------------------------------------------


def test_sentinel_key_never_leaks() -> None:
    """A server that echoes the key back, in body and headers: the error shows none of it."""
    body = openai_body(
        f"Incorrect API key provided: {SENTINEL_KEY}.", "invalid_request_error", "invalid_api_key"
    )
    headers = {
        "content-type": "application/json",
        "x-request-id": f"req_{SENTINEL_KEY}",
        "authorization": f"Bearer {SENTINEL_KEY}",
    }
    for make in (
        lambda c: OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=c),
        lambda c: AnthropicProvider("m", api_key=SENTINEL_KEY, client=c),
    ):
        err = run(make, respond(body, status=401, headers=headers)).error
        assert isinstance(err, AuthFailed)
        everything = " ".join(
            [str(err), repr(err), err.message, json.dumps(err.body), json.dumps(err.headers)]
        )
        assert SENTINEL_KEY not in everything
        assert "***" in err.message
        assert "authorization" not in err.headers
    # mid-stream too
    stream = (
        f'data: {{"error": {{"message": "bad key {SENTINEL_KEY}", "type": "server_error"}}}}\n\n'
    )
    err = run(
        lambda c: OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=c), respond(stream)
    ).error
    assert isinstance(err, StreamInterrupted)
    assert SENTINEL_KEY not in str(err) and SENTINEL_KEY not in json.dumps(err.body)
    # and in transport errors
    chunks = Chunks([b"data: {}\n\n", httpx.ReadError(f"reset {SENTINEL_KEY}")])
    err = run(
        lambda c: OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=c), respond(stream=chunks)
    ).error
    assert isinstance(err, StreamInterrupted)
    assert SENTINEL_KEY not in str(err)


def test_invalid_response_for_2xx_garbage() -> None:
    served = run(
        lambda c: OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=c),
        respond(b"\x00\x01 not json", headers={"content-type": "application/json"}),
    )
    assert isinstance(served.error, InvalidResponse)
    assert classify(served.error) is Action.FAIL
    # a body with no SSE events at all (no content type) is a broken stream
    served = run(
        lambda c: OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=c), respond(b"", headers={})
    )
    assert isinstance(served.error, StreamInterrupted)
    _ = SSE


def test_no_response_headers_within_the_timeouts_is_transport_error() -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200)

    async def main() -> BaseException | None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(never)) as client:
            provider = OpenAIProvider(
                "gpt-4o",
                api_key=SENTINEL_KEY,
                client=client,
                connect_timeout=0.05,
                idle_timeout=0.1,
            )
            try:
                async for _ in provider.stream(ModelRequest((Message.user("hi"),))):
                    pass
            except Exception as exc:
                return exc
        return None

    err = asyncio.run(main())
    assert isinstance(err, TransportError)
    assert "0.1 s" in err.message
    assert classify(err) is Action.RETRY


def test_a_code_of_non_ascii_digits_is_read_as_a_code_not_a_crash() -> None:
    # hypothesis found it: "¹".isdigit() is True, int("¹") raises ValueError
    from nbagent.providers._http_errors import error_from_payload

    err = error_from_payload(
        "anthropic", {"type": "error", "error": {"code": "¹", "message": "x"}}, {}
    )
    assert err.code == "¹"


# -- a 400 that refuses the output schema is a configuration error, never retried ---------------


def _schema_bodies() -> list[dict[str, Any]]:
    from provider_support import fixture_text

    text = fixture_text("assembled__output-schema-400-bodies.jsonl")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("case", _schema_bodies(), ids=lambda c: c["source"].split(" ")[0])
def test_a_400_refusing_the_output_schema_is_a_config_error(case: dict[str, Any]) -> None:
    from nbagent.errors import SchemaRejected

    # the server's own verdict does not make it retryable: the schema is wrong the next time too
    err = error_from_response(
        case["provider"], case["status"], json.dumps(case["body"]), {"x-should-retry": "true"}
    )
    assert isinstance(err, SchemaRejected) and isinstance(err, ConfigError), case["source"]
    assert classify(err) is Action.FAIL
    assert err.status_code == 400
    assert "output_mode=" in str(err)  # the sentence says what to do


def test_other_400s_stay_bad_requests() -> None:
    from nbagent.errors import SchemaRejected

    for body in (
        openai_body("temperature must be >= 0", "invalid_request_error", "decimal_below_min_value"),
        anthropic_body(
            "invalid_request_error",
            "tools.3.custom.input_schema: JSON schema is invalid. It must match JSON Schema "
            "draft 2020-12",
        ),
    ):
        err = error_from_response("openai", 400, body, {})
        assert isinstance(err, BadRequest) and not isinstance(err, SchemaRejected)
