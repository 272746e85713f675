"""The words of providers' error bodies that say which failure it is: error codes and types,
message markers, the fields of a refused output schema.

`_http_errors` reads a body against these; they are here, apart from the reading, so the
tables are one place to add a provider's words (a new code for a failure kind).
"""

from __future__ import annotations

import re

from ._error_text import CONTEXT_CODES

__all__ = [
    "ANTHROPIC_TYPE_STATUS",
    "AUTH_CODES",
    "FILTER_CODES",
    "MAX_TEXT_BODY_CHARS",
    "NOT_FOUND_CODES",
    "NOT_FOUND_MARKERS",
    "OUTPUT_SCHEMA_FIELDS",
    "OUTPUT_SCHEMA_TEXT",
    "OVERLOADED_CODES",
    "QUOTA_CODES",
    "QUOTA_MARKERS",
    "RATE_CODES",
    "SCHEMA_HINT",
    "TEXT_CODE",
    "TEXT_CODES",
]

MAX_TEXT_BODY_CHARS = 64 * 1024

# Anthropic names its errors by type only; mid-stream they come without an HTTP status.
ANTHROPIC_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "enforced_spend_limit_reached",
        "billing_error",
        "billing_hard_limit_reached",
        "insufficient_credits",
        "payment_required",
        "budget_exceeded",
    }
)
QUOTA_MARKERS = (
    "credit balance is too low",
    "insufficient credits",
    "exceeded your current quota",
    "spend limit",
    "billing",
)
OVERLOADED_CODES = frozenset({"overloaded_error", "overloaded"})
RATE_CODES = frozenset({"rate_limit_error", "rate_limit_exceeded", "rate_limited", "tokens"})
AUTH_CODES = frozenset(
    {"authentication_error", "permission_error", "invalid_api_key", "unauthorized"}
)
# "Not found" in each dialect: Anthropic's type, OpenAI's code (the Responses API sends it with
# HTTP 400), Azure's deployment, Gemini's `NOT_FOUND` status, vLLM's and LiteLLM's exception name.
# Read whatever the status, so a fallback chain moves on from a model the server does not have.
NOT_FOUND_CODES = frozenset(
    {
        "not_found_error",
        "model_not_found",
        "deploymentnotfound",
        "not_found",
        "notfounderror",
        "model_not_available",
    }
)
# OpenRouter names an unknown model in its message only (`{"code": 400, "message": "x is not a
# valid model ID"}`); Ollama says `model "x" not found, try pulling it first`.
NOT_FOUND_MARKERS = ("is not a valid model id", "try pulling it first")
FILTER_CODES = frozenset(
    {"content_filter", "content_policy_violation", "content_filtered", "moderation", "safety"}
)
# Where a provider's 400 says the output schema is what it refuses (the field it names in
# `param`, or the start of its message): OpenAI Chat `response_format` ("Invalid schema for
# response_format 'X': ...", param response_format), the Responses API `text.format.schema`,
# Anthropic `output_config.format.schema: Invalid schema: ...` (and the beta `output_format`),
# Gemini `generation_config.response_schema` / `response_json_schema` ("Invalid JSON payload
# received. Unknown name ... at 'generation_config.response_schema'"), and Gemini 2.x refusing
# JSON mode beside function calling ("Function calling with a response mime type:
# 'application/json' is unsupported", googleapis/python-genai#867).
OUTPUT_SCHEMA_FIELDS = (
    "response_format",
    "text.format",
    "output_config.format",
    "output_format",
    "generation_config.response_schema",
    "generation_config.response_json_schema",
    "generationconfig.responseschema",
    "generationconfig.responsejsonschema",
)
OUTPUT_SCHEMA_TEXT = re.compile(
    r"invalid schema for response_format|with a response mime type|(^|[\s'\"])("
    + "|".join(re.escape(f) for f in OUTPUT_SCHEMA_FIELDS)
    + r")\b",
    re.I,
)
SCHEMA_HINT = (
    " The output schema (output=), or the form it was sent in, is what the provider refused: "
    "change it as the message says, or pass output_mode='auto' (it tries the other forms this "
    "server may take, down to a tool), 'tool' or 'prompted'."
)

# Codes distinctive enough to count when a gateway mentions them anywhere in its message text.
TEXT_CODES = sorted(
    c
    for c in QUOTA_CODES
    | CONTEXT_CODES
    | OVERLOADED_CODES
    | RATE_CODES
    | AUTH_CODES
    | NOT_FOUND_CODES
    | FILTER_CODES
    if "_" in c
)
TEXT_CODE = re.compile(r"\b(" + "|".join(map(re.escape, TEXT_CODES)) + r")\b")
