"""Errors behind a gateway, without one running: recorded LiteLLM bodies and forwarded headers.

The bodies were recorded from a real LiteLLM proxy in front of the mock server (the fixture's
first line says how); `test_gateway_litellm.py` runs the proxy itself. Also the server's wish in
its edge cases: `llm_provider-` headers, negative and zero values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_support import fixture_text

from nbagent.errors import (
    Action,
    AuthFailed,
    ContextOverflow,
    Overloaded,
    QuotaExceeded,
    RateLimited,
    classify,
)
from nbagent.providers._error_text import kept_headers
from nbagent.providers._http_errors import error_from_payload, error_from_response
from nbagent.providers._server_wish import server_wish

RECORDED = "litellm-proxy__error-bodies.jsonl"


def recorded(upstream: str, fault: str) -> tuple[int, dict[str, Any]]:
    for line in fixture_text(RECORDED).splitlines():
        entry = json.loads(line)
        if (entry["upstream"], entry["fault"]) == (upstream, fault):
            return entry["status"], entry["body"]
    raise AssertionError(f"no recording of {fault} from {upstream}")


@pytest.mark.parametrize(
    ("upstream", "fault", "cls", "action", "code"),
    [
        ("claude-mock", "quota", QuotaExceeded, Action.FAIL, "enforced_spend_limit_reached"),
        ("claude-mock", "402", QuotaExceeded, Action.FAIL, "billing_error"),
        ("claude-mock", "403", AuthFailed, Action.FAIL, "permission_error"),
        ("claude-mock", "529", Overloaded, Action.RETRY, "overloaded_error"),
        ("claude-mock", "429:retry_after=2", RateLimited, Action.RETRY, "rate_limit_error"),
        ("gpt-mock", "429:retry_after=2", RateLimited, Action.RETRY, "throttling_error"),
    ],
)
def test_recorded_litellm_bodies(
    upstream: str, fault: str, cls: type[Exception], action: Action, code: str
) -> None:
    status, body = recorded(upstream, fault)
    err = error_from_response("openai", status, json.dumps(body), {})
    assert type(err) is cls
    assert classify(err) is action
    assert err.code == code
    if fault.startswith("429"):
        assert err.retry_after == 2.0  # "Please retry after 2s" / "try again in 2s", from the text


def test_recorded_overflow_through_litellm_keeps_the_numbers() -> None:
    status, body = recorded("claude-mock", "overflow")
    err = error_from_response("openai", status, json.dumps(body), {})
    assert isinstance(err, ContextOverflow)
    assert err.tokens is not None and err.limit == 200_000 and err.tokens > err.limit


def test_the_issues_spend_limit_example() -> None:
    inner = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "You have reached your specified API usage limits.",
            "details": {"error_code": "enforced_spend_limit_reached"},
        },
    }
    body = {
        "error": {
            "type": "throttling_error",
            "code": "429",
            "message": f"litellm.RateLimitError: AnthropicException - b'{json.dumps(inner)}'",
        }
    }
    err = error_from_response("openai", 429, json.dumps(body), {})
    assert isinstance(err, QuotaExceeded)
    assert classify(err) is Action.FAIL


def test_a_code_named_only_in_unparseable_text_still_counts() -> None:
    body = {"error": {"message": "upstream said insufficient_quota (truncated {", "code": "429"}}
    err = error_from_response("openai", 429, json.dumps(body), {})
    assert isinstance(err, QuotaExceeded) and err.code == "insufficient_quota"


def test_a_gateway_midstream_error_keeps_the_upstreams_class() -> None:
    payload = {
        "error": {
            "message": "litellm.MidStreamFallbackError: AnthropicError - "
            '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            "code": "500",
        }
    }
    assert isinstance(error_from_payload("openai", payload, {}), Overloaded)


# -- the server's wish -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"llm_provider-retry-after": "7"}, 7.0),
        ({"llm_provider-retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "3", "llm_provider-retry-after": "7"}, 3.0),  # the gateway's own first
        ({"retry-after": "-1"}, None),  # negative: ignored, the policy's delay applies
        ({"retry-after-ms": "-200", "retry-after": "2"}, 2.0),  # a negative one is skipped
        ({"retry-after-ms": "-200"}, None),
        ({"retry-after": "0"}, 0.0),  # zero means now
        ({"retry-after-ms": "0"}, 0.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date past: now
        (
            {
                "llm_provider-x-ratelimit-remaining-requests": "0",
                "llm_provider-x-ratelimit-reset-requests": "6m0s",
            },
            360.0,
        ),
    ],
)
def test_server_wish_edges(headers: dict[str, str], seconds: float | None) -> None:
    assert server_wish(headers) == seconds


def test_a_negative_wish_leaves_the_policys_delay() -> None:
    body = json.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}})
    err = error_from_response("anthropic", 429, body, {"retry-after": "-5"})
    assert isinstance(err, RateLimited) and err.retry_after is None


def test_forwarded_rate_limit_headers_are_kept_under_the_upstreams_names() -> None:
    kept = kept_headers(
        {
            "llm_provider-anthropic-ratelimit-requests-remaining": "0",
            "llm_provider-retry-after": "4",
            "llm_provider-server": "nbagent-mock/0.1",
            "x-litellm-call-id": "abc",
        }
    )
    assert kept == {"anthropic-ratelimit-requests-remaining": "0", "retry-after": "4"}
