"""The decision table of DESIGN.md, row by row, through `classify`."""

from __future__ import annotations

import asyncio

import pytest

from nbagent import errors as E
from nbagent.errors import Action, classify


def perr(cls: type[E.ProviderError], **kw: object) -> E.ProviderError:
    return cls("boom", provider="anthropic", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (perr(E.RateLimited, status_code=429), Action.RETRY),
        (perr(E.Overloaded, status_code=529), Action.RETRY),
        (perr(E.ServerError, status_code=503), Action.RETRY),
        (perr(E.TransportError), Action.RETRY),
        (perr(E.StreamInterrupted), Action.RETRY),
        (perr(E.EmptyResponse, status_code=200), Action.RETRY),
        (perr(E.ContextOverflow, status_code=400), Action.COMPACT),
        (perr(E.QuotaExceeded, status_code=429), Action.FAIL),
        (perr(E.AuthFailed, status_code=401), Action.FAIL),
        (perr(E.ModelNotFound, status_code=404), Action.FAIL),
        (perr(E.BadRequest, status_code=400), Action.FAIL),
        (perr(E.InvalidResponse, status_code=200), Action.FAIL),
        (perr(E.ContentFiltered), Action.FAIL),
        (E.ConfigError("no key"), Action.FAIL),
        (E.Aborted("stop"), Action.FAIL),
        (asyncio.CancelledError(), Action.FAIL),
        (E.HostError("widget broke"), Action.FAIL),
        (E.BudgetExceeded("max_turns", 3, 3), Action.FAIL),
        (E.LengthResumeExhausted("again"), Action.FAIL),
        (E.OutputInvalid([E.OutputIssue("age", "Input should be a valid integer")]), Action.REASK),
        (E.OutputTruncated(256, 256), Action.FAIL),
        (perr(E.SchemaRejected, status_code=400), Action.FAIL),
        (RuntimeError("a bug"), Action.FAIL),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_classify_follows_the_design_table(error: BaseException, action: Action) -> None:
    assert classify(error) is action


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (ValueError("bad input"), Action.TOOL_RESULT),
        (FileNotFoundError("x"), Action.TOOL_RESULT),
        (asyncio.TimeoutError(), Action.TOOL_RESULT),
        (E.HostError("save failed"), Action.FAIL),
        (MemoryError(), Action.FAIL),
        (asyncio.CancelledError(), Action.FAIL),
        (KeyboardInterrupt(), Action.FAIL),
    ],
)
def test_tool_failures_become_results_unless_the_host_is_in_trouble(
    error: BaseException, action: Action
) -> None:
    assert classify(error, phase="tool") is action


def test_x_should_retry_overrides_the_table() -> None:
    assert classify(perr(E.BadRequest, status_code=400, should_retry=True)) is Action.RETRY
    assert classify(perr(E.ServerError, status_code=500, should_retry=False)) is Action.FAIL
    # a quota does not come back by retrying, whatever a header says
    assert classify(perr(E.QuotaExceeded, should_retry=True)) is Action.FAIL


def test_every_error_in_the_table_derives_from_nbagenterror() -> None:
    names = [n for n in E.__all__ if n not in ("Action", "OutputIssue", "classify", "describe")]
    for name in names:
        assert issubclass(getattr(E, name), E.NbAgentError), name
    assert issubclass(E.QuotaExceeded, E.RateLimited)
    assert E.QuotaExceeded("x").reason == "quota"
    assert E.RateLimited("x").reason == "rate_limit"


def test_the_tree_in_the_docstring_names_every_class() -> None:
    doc = E.__doc__ or ""
    for name in E.__all__:
        if name not in ("Action", "classify", "describe"):
            assert name in doc, name


def test_provider_error_message_is_readable_and_carries_fields() -> None:
    err = E.RateLimited(
        "slow down",
        provider="anthropic",
        status_code=429,
        code="rate_limit_error",
        request_id="req_1",
        retry_after=2.0,
    )
    assert str(err) == (
        "Anthropic: rate limit (HTTP 429, rate_limit_error): slow down [request id req_1]"
    )
    assert (err.provider, err.status_code, err.request_id, err.retry_after) == (
        "anthropic",
        429,
        "req_1",
        2.0,
    )
    assert "RateLimited(" in repr(err)


def test_session_file_error_names_file_and_problem() -> None:
    err = E.SessionFileError("/tmp/s.json", "not valid JSON")
    assert "/tmp/s.json" in str(err) and "not valid JSON" in str(err)


def test_a_rejected_schema_is_a_config_error_that_no_header_makes_retryable() -> None:
    err = perr(E.SchemaRejected, status_code=400, should_retry=True)
    assert isinstance(err, E.ConfigError) and isinstance(err, E.BadRequest)
    assert classify(err) is Action.FAIL
    assert err.provider == "anthropic" and err.status_code == 400


def test_an_invalid_answer_names_its_fields_and_keeps_the_raw_text() -> None:
    err = E.OutputInvalid(
        [E.OutputIssue("items.2.price", "Input should be a number"), E.OutputIssue("", "x")],
        raw='{"items": []}',
    )
    assert err.first == "items.2.price: Input should be a number (and 1 more)"
    assert "2 errors" in str(err) and "items.2.price" in str(err)
    assert err.raw == '{"items": []}'
    assert "after 2 reasks" in str(err.with_reasks(2))
    # a tool failure is the model's to fix, whatever it is; an answer's reask is the request's
    assert classify(err, phase="tool") is Action.TOOL_RESULT


def test_a_truncated_answer_says_the_limit_the_tokens_and_what_to_do() -> None:
    text = str(E.OutputTruncated(1024, 1024))
    assert "max_tokens=1,024" in text and "1,024 tokens" in text
    assert "raise max_tokens" in text
