"""The Gemini wire format for the mock server: replies and errors (the request parser, and the
signatures it checks, are in `_request_parsers` and `_conversation.sign`).

`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (or `:generateContent`). Replies
stream one `GenerateContentResponse` per SSE event; parallel function calls arrive whole in one
chunk with the `finishReason`; usage rides on every chunk. Like Gemini 3, the mock signs the first
function call of each reply (and the last part of a text reply) with a `thoughtSignature`, and
refuses a history whose function-calling turns come back without it, or with it altered, so a
client that drops or rewrites signatures fails here as it would there.

Errors carry Gemini's `google.rpc` details: a per-minute 429 says its wait in `RetryInfo` (no
Retry-After header), the `quota` fault is a per-day `QuotaFailure` that still carries a short
`retryDelay` (as the recordings show), overload is 503 `UNAVAILABLE`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ._codec import Codec, Piece, json_or
from ._conversation import Conversation, Format, sign, sign_text
from ._reply import MockReply

_INTERNAL = (
    "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting"
)
_NO_MODEL = (
    "models/{model} is not found for API version v1beta, or is not supported for generateContent."
)
_HIGH_DEMAND = (
    "This model is currently experiencing high demand. Spikes in demand are usually "
    "temporary. Please try again later."
)
_OVERLOADED = "The model is overloaded. Please try again later."
# status -> (Gemini's status name, its message)
STATUS: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    402: ("RESOURCE_EXHAUSTED", "Your prepaid credits are used up."),
    403: ("PERMISSION_DENIED", "The caller does not have permission"),
    404: ("NOT_FOUND", _NO_MODEL),
    408: ("DEADLINE_EXCEEDED", "The request timed out."),
    409: ("ABORTED", "The operation was aborted."),
    413: ("INVALID_ARGUMENT", "Request payload size exceeds the limit."),  # a 400 (http_status)
    429: ("RESOURCE_EXHAUSTED", ""),  # a quota's message: `_quota`
    500: ("INTERNAL", _INTERNAL),
    502: ("UNKNOWN", "Bad gateway."),
    503: ("UNAVAILABLE", _HIGH_DEMAND),
    504: ("DEADLINE_EXCEEDED", "The request timed out. Please try again."),
    529: ("UNAVAILABLE", _OVERLOADED),  # Gemini has no 529: its overload is a 503 (http_status)
}
_FINISH = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "max_tokens": "MAX_TOKENS",
    "refusal": "SAFETY",  # an empty candidate, as Gemini's safety stop comes
}
_BLOCKED = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]
_HELP = {
    "@type": "type.googleapis.com/google.rpc.Help",
    "links": [
        {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
        }
    ],
}


# --- replies ------------------------------------------------------------------------------------


def _sse(chunk: dict[str, Any]) -> bytes:
    """One event of a Gemini stream (its JSON spaced, its lines ended with CRLF)."""
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\r\n\r\n".encode()


def _chunk(
    parts: list[dict[str, Any]], reply: MockReply, output: int, model: str, rid: str, finish: str
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish == "SAFETY":
        candidate = {"content": {}, "finishReason": finish, "index": 0, "safetyRatings": _BLOCKED}
    elif finish:
        candidate["finishReason"] = finish
        if finish == "STOP" and any("functionCall" in p for p in parts):
            candidate["finishMessage"] = "Model generated function call(s)."
    return {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": reply.input_tokens,
            "candidatesTokenCount": output,
            "totalTokenCount": reply.input_tokens + output,
        },
        "modelVersion": model,
        "responseId": rid,
    }


def _calls(reply: MockReply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for call in reply.tool_calls:
        args = json_or(call.arguments, {})
        if not isinstance(args, dict):
            args = {}  # Gemini sends arguments as objects; unparseable ones arrive empty
        part: dict[str, Any] = {"functionCall": {"name": call.name, "args": args}}
        if not parts:
            part["thoughtSignature"] = sign(call.name, args)
        parts.append(part)
    return parts


# --- errors -------------------------------------------------------------------------------------


def gemini_error(status: int, message: str, *details: dict[str, Any]) -> dict[str, Any]:
    error: dict[str, Any] = {
        "code": status,
        "message": message,
        "status": STATUS.get(status, ("UNKNOWN", ""))[0],
    }
    if details:
        error["details"] = list(details)
    return {"error": error}


def _quota(model: str, quota_id: str, value: str, retry: str) -> dict[str, Any]:
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    message = (
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. "
        f"\n* Quota exceeded for metric: {metric}, limit: {value}, model: {model}\n"
        f"Please retry in {retry}s."
    )
    violation = {
        "quotaMetric": metric,
        "quotaId": quota_id,
        "quotaDimensions": {"location": "global", "model": model},
        "quotaValue": value,
    }
    failure = {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]}
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry}s"}
    return gemini_error(429, message, _HELP, failure, retry_info)


class GeminiCodec(Codec):
    name: Format = "gemini"
    id_header = None
    request_prefix = "gem_"
    default_window = 1_048_576
    statuses = STATUS
    overflow_text = (
        "The input token count ({tokens}) exceeds the maximum number of tokens allowed ({maximum})."
    )

    def stream(
        self, reply: MockReply, conv: Conversation, mid: str, azure: bool
    ) -> Iterator[Piece]:
        """SSE chunks: thoughts, text deltas, then a last chunk with the `finishReason` holding
        every function call (parallel calls arrive together) or, after text, an empty signed
        text part."""
        out = 0
        step = max(1, reply.output_tokens // max(1, len(reply.text_deltas) + 1))

        def data(parts: list[dict[str, Any]], tokens: int, reason: str = "") -> bytes:
            return _sse(_chunk(parts, reply, tokens, conv.model, mid, reason))

        for piece in reply.thinking_deltas:
            yield "body", data([{"text": piece, "thought": True}], out)
        for piece in reply.text_deltas:
            out = min(reply.output_tokens, out + step)
            yield "text", data([{"text": piece}], out)
        last = _calls(reply)
        if not last and reply.text_deltas and reply.stop_reason == "end_turn":
            last = [{"text": "", "thoughtSignature": sign_text(reply.text)}]
        yield "final", data(last, reply.output_tokens, _FINISH[reply.stop_reason])

    def whole(self, reply: MockReply, conv: Conversation, mid: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text_deltas else []
        parts += _calls(reply)
        finish = _FINISH[reply.stop_reason]
        return _chunk(parts, reply, reply.output_tokens, conv.model, mid, finish)

    def status_error(self, status: int, model: str, rid: str, retry: str) -> dict[str, Any]:
        if status == 429:
            return _quota(model, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "5", retry)
        return super().status_error(status, model, rid, retry)

    def quota_error(self, rid: str, model: str) -> dict[str, Any]:
        # a daily quota's 429 still says "retry in 48s", which would not help
        return _quota(model, "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "20", "48")

    def error_body(
        self, status: int, message: str, rid: str, param: str | None = None
    ) -> dict[str, Any]:
        return gemini_error(self.http_status(status), message)

    def midstream_error(self, mid: str) -> bytes:
        return _sse(gemini_error(503, _OVERLOADED))

    def malformed(self, mid: str) -> bytes:
        return b'data: {"candidates": [{"content": {"parts": [{"text": "trunc\r\n\r\n'

    def retry_headers(self, seconds: float) -> dict[str, str]:
        return {}  # Gemini's wait is in the body (RetryInfo), not a header

    def http_status(self, status: int) -> int:
        # Gemini says overload with 503, not 529, and a payload too large with 400, not 413
        return {529: 503, 413: 400}.get(status, status)


GEMINI = GeminiCodec()
