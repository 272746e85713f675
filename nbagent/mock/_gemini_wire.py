"""The Gemini wire format for the mock server: parsing requests, encoding replies and errors.

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

import base64
import json
from collections.abc import Iterator
from typing import Any

from ._codec import Codec, Piece, Route, json_or, mac
from ._conversation import (
    Block,
    Conversation,
    Format,
    RequestError,
    Text,
    ToolResult,
    ToolUse,
    Turn,
    _Counter,
    _dumps,
    _require_dict,
    _require_list,
)
from ._output_request import gemini_callable, gemini_output
from ._reply import MockReply

__all__ = [
    "GEMINI",
    "SIGNATURE_STANDIN",
    "gemini_error",
    "parse_gemini",
    "sign",
]

SIGNATURE_STANDIN = "skip_thought_signature_validator"  # Gemini's documented stand-in
_KEY = b"nbagent-mock-gemini"
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
# status -> (Gemini's status name, its message)
STATUS: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    402: ("RESOURCE_EXHAUSTED", "Your prepaid credits are used up."),
    403: ("PERMISSION_DENIED", "The caller does not have permission"),
    404: ("NOT_FOUND", _NO_MODEL),
    408: ("DEADLINE_EXCEEDED", "The request timed out."),
    409: ("ABORTED", "The operation was aborted."),
    413: ("INVALID_ARGUMENT", "Request payload size exceeds the limit."),
    429: ("RESOURCE_EXHAUSTED", ""),  # a quota's message: `_quota`
    500: ("INTERNAL", _INTERNAL),
    502: ("UNKNOWN", "Bad gateway."),
    503: ("UNAVAILABLE", _HIGH_DEMAND),
    504: ("DEADLINE_EXCEEDED", "The request timed out. Please try again."),
}
_FINISH = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "max_tokens": "MAX_TOKENS",
    "refusal": "SAFETY",  # an empty candidate, as Gemini's safety stop comes
}
_OVERLOADED = "The model is overloaded. Please try again later."
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


def sign(name: str, args: Any) -> str:
    """The signature the mock gives a function call: the same call always gets the same one."""
    return _text_signature(json.dumps([name, args], sort_keys=True, separators=(",", ":")))


def _text_signature(text: str) -> str:
    return base64.b64encode(mac(_KEY, text)).decode()


# --- requests -----------------------------------------------------------------------------------


def _check_signature(part: dict[str, Any], call: dict[str, Any], where: str) -> None:
    signature = part.get("thoughtSignature")
    name = str(call.get("name", ""))
    if signature is None:
        raise RequestError(
            "Function call is missing a thought_signature in functionCall parts. This is "
            "required for tools to work correctly, and missing thought_signature may lead to "
            f"degraded model performance. Additional data, function call `{name}` , "
            f"position {where}.",
            where,
        )
    if signature != SIGNATURE_STANDIN and signature != sign(name, call.get("args") or {}):
        raise RequestError("Corrupted thought signature.", where)


def _parts(content: Any, counter: _Counter, where: str, role: str) -> tuple[Block, ...]:
    blocks: list[Block] = []
    signed = False
    for i, raw in enumerate(_require_list(content.get("parts", []), f"{where}.parts")):
        part = _require_dict(raw, f"{where}.parts[{i}]")
        call = part.get("functionCall")
        response = part.get("functionResponse")
        if isinstance(call, dict):
            if role == "model" and not signed:
                _check_signature(part, call, f"{where}.parts[{i}]")
                signed = True
            name = counter.add(str(call.get("name", "")))
            args = counter.add(_dumps(call.get("args") or {}))
            blocks.append(ToolUse(str(call.get("id") or name), name, args))
        elif isinstance(response, dict):
            body = response.get("response")
            body = body if isinstance(body, dict) else {}
            is_error = "error" in body and "output" not in body
            value = body.get("error") if is_error else body.get("output", body.get("result", body))
            text = value if isinstance(value, str) else _dumps(value)
            call_id = str(response.get("id") or response.get("name") or "")
            blocks.append(ToolResult(call_id, counter.add(text), is_error))
        elif isinstance(part.get("text"), str):
            if part.get("thought") is not True:
                blocks.append(Text(counter.add(part["text"])))
        elif "inlineData" in part or "fileData" in part:
            counter.images += 1
    return tuple(blocks)


def parse_gemini(body: Any, model: str, *, stream: bool) -> Conversation:
    """A `generateContent` request (the model comes from the path) as a neutral conversation."""
    body = _require_dict(body, "body")
    counter = _Counter()
    turns: list[Turn] = []
    for i, raw in enumerate(_require_list(body.get("contents"), "contents")):
        content = _require_dict(raw, f"contents[{i}]")
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise RequestError(
                f"Please use a valid role: user, model (got {role!r}).", f"contents[{i}].role"
            )
        blocks = _parts(content, counter, f"contents[{i}]", role)
        turns.append(Turn("assistant" if role == "model" else "user", blocks))
    system = ""
    instruction = body.get("systemInstruction")
    if isinstance(instruction, dict):
        texts = [p.get("text", "") for p in instruction.get("parts", []) if isinstance(p, dict)]
        system = counter.add("\n".join(str(t) for t in texts))
    tools: dict[str, dict[str, Any]] = {}
    for group in _require_list(body.get("tools") or [], "tools"):
        for decl in _require_dict(group, "tools").get("functionDeclarations") or []:
            decl = _require_dict(decl, "tools.functionDeclarations")
            # the API reads either spelling; google-genai sends this field in snake_case
            keys = ("parametersJsonSchema", "parameters_json_schema", "parameters")
            schema = next((decl[k] for k in keys if k in decl), None)
            tools[str(decl.get("name", ""))] = schema if isinstance(schema, dict) else {}
            counter.add(_dumps(decl))
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    max_tokens = config.get("maxOutputTokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise RequestError(
            "generation_config.max_output_tokens must be a positive integer.",
            "generationConfig.maxOutputTokens",
        )
    thinking = config.get("thinkingConfig")
    conversation = Conversation(
        format="gemini",
        model=model,
        system=system,
        turns=tuple(turns),
        tools=gemini_callable(body, tools),
        stream=stream,
        include_usage=True,
        thinking=isinstance(thinking, dict) and bool(thinking.get("includeThoughts")),
        max_tokens=max_tokens,
    )
    return counter.counted(conversation, gemini_output(body))


# --- replies ------------------------------------------------------------------------------------


def _sse(chunk: dict[str, Any]) -> bytes:
    """One event of a Gemini stream (its JSON spaced, its lines ended with CRLF)."""
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\r\n\r\n".encode()


def _usage(reply: MockReply, output: int) -> dict[str, Any]:
    return {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": output,
        "totalTokenCount": reply.input_tokens + output,
    }


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
        "usageMetadata": _usage(reply, output),
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


def _quota(model: str, quota_id: str, metric: str, value: str, retry: str) -> dict[str, Any]:
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


def per_minute_quota(model: str, retry: str) -> dict[str, Any]:
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    return _quota(model, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", metric, "5", retry)


def per_day_quota(model: str) -> dict[str, Any]:
    """A daily quota's 429: it still says 'retry in 48s', which would not help."""
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    return _quota(model, "GenerateRequestsPerDayPerProjectPerModel-FreeTier", metric, "20", "48")


class GeminiCodec(Codec):
    name: Format = "gemini"
    pattern = r".*/models/(?P<model>.+):(?P<method>streamGenerateContent|generateContent)"
    id_header = None
    request_prefix = "gem_"
    default_window = 1_048_576
    overflow_text = (
        "The input token count ({tokens}) exceeds the maximum number of tokens allowed ({maximum})."
    )

    def parse(self, body: Any, route: Route) -> Conversation:
        return parse_gemini(body, route.model, stream=bool(route.stream))

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
            last = [{"text": "", "thoughtSignature": _text_signature(reply.text)}]
        yield "final", data(last, reply.output_tokens, _FINISH[reply.stop_reason])

    def whole(self, reply: MockReply, conv: Conversation, mid: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text_deltas else []
        parts += _calls(reply)
        finish = _FINISH[reply.stop_reason]
        return _chunk(parts, reply, reply.output_tokens, conv.model, mid, finish)

    def status_error(self, status: int, model: str, rid: str, retry: str) -> dict[str, Any]:
        if status == 429:
            return per_minute_quota(model, retry)
        if status == 529:  # Gemini has no 529: its overload is a 503
            return gemini_error(503, _OVERLOADED)
        return gemini_error(status, STATUS.get(status, STATUS[500])[1].format(model=model))

    def quota_error(self, rid: str, model: str) -> dict[str, Any]:
        return per_day_quota(model)

    def error_body(
        self, status: int, message: str, rid: str, param: str | None = None
    ) -> dict[str, Any]:
        return gemini_error(status, message)

    def midstream_error(self, mid: str) -> bytes:
        return _sse(gemini_error(503, _OVERLOADED))

    def malformed(self, mid: str) -> bytes:
        return b'data: {"candidates": [{"content": {"parts": [{"text": "trunc\r\n\r\n'

    def retry_headers(self, seconds: float) -> dict[str, str]:
        return {}  # Gemini's wait is in the body (RetryInfo), not a header

    def http_status(self, status: int) -> int:
        return 503 if status == 529 else status  # Gemini says overload with 503, not 529


GEMINI = GeminiCodec()
