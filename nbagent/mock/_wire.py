"""Encoding demo replies and errors in the Anthropic Messages and OpenAI Chat Completions formats.

Streams are produced as ``(kind, bytes)`` pieces so the server can inject faults at the right
place: ``head`` (before content), ``text`` (one text delta), ``body`` (other content events) and
``final`` (the terminating events: Anthropic ``message_delta``/``message_stop``, OpenAI's finish
chunk, usage chunk and ``[DONE]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from ._conversation import Format
from ._reply import MockReply, split_words

PieceKind = Literal["head", "text", "body", "final"]
Piece = tuple[PieceKind, bytes]
FRAGMENT_CHARS = 12
FINGERPRINT = "fp_nbagent_demo"

_OPENAI_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "stop",  # a refusal is the `refusal` field, with an ordinary stop
}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse_event(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {_json(data)}\n\n".encode()


def sse_data(data: Any) -> bytes:
    return f"data: {_json(data)}\n\n".encode()


def fragments(arguments: str) -> list[str]:
    """Split tool arguments into streamed fragments."""
    return [arguments[i : i + FRAGMENT_CHARS] for i in range(0, len(arguments), FRAGMENT_CHARS)]


# --- Anthropic ----------------------------------------------------------------------------------


def _anthropic_input(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # [demo:bad_json] in a non-streaming reply: the raw text, not an object


def _said(reply: MockReply) -> MockReply:
    """Anthropic says a refusal in its text, with `stop_reason: refusal`."""
    if reply.refusal and not reply.text_deltas:
        return MockReply(
            text_deltas=split_words(reply.refusal),
            stop_reason="refusal",
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
        )
    return reply


def anthropic_message(reply: MockReply, *, model: str, message_id: str) -> dict[str, Any]:
    reply = _said(reply)
    content: list[dict[str, Any]] = []
    if reply.thinking_deltas:
        content.append(
            {"type": "thinking", "thinking": reply.thinking, "signature": reply.signature}
        )
    if reply.text_deltas:
        content.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": _anthropic_input(call.arguments),
            }
        )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse_event(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def _start(index: int, block: dict[str, Any]) -> bytes:
    data = {"type": "content_block_start", "index": index, "content_block": block}
    return sse_event("content_block_start", data)


def _stop(index: int) -> bytes:
    return sse_event("content_block_stop", {"type": "content_block_stop", "index": index})


def anthropic_stream(reply: MockReply, *, model: str, message_id: str) -> Iterator[Piece]:
    reply = _said(reply)
    empty = MockReply(input_tokens=reply.input_tokens)
    start = anthropic_message(empty, model=model, message_id=message_id)
    start.update(stop_reason=None, usage={"input_tokens": reply.input_tokens, "output_tokens": 1})
    yield "head", sse_event("message_start", {"type": "message_start", "message": start})
    yield "head", sse_event("ping", {"type": "ping"})
    index = 0
    if reply.thinking_deltas:
        yield "body", _start(index, {"type": "thinking", "thinking": "", "signature": ""})
        for piece in reply.thinking_deltas:
            yield "body", _delta(index, {"type": "thinking_delta", "thinking": piece})
        yield "body", _delta(index, {"type": "signature_delta", "signature": reply.signature})
        yield "body", _stop(index)
        index += 1
    if reply.text_deltas:
        yield "body", _start(index, {"type": "text", "text": ""})
        for piece in reply.text_deltas:
            yield "text", _delta(index, {"type": "text_delta", "text": piece})
        yield "body", _stop(index)
        index += 1
    for call in reply.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield "body", _start(index, block)
        for fragment in ["", *fragments(call.arguments)]:
            yield "body", _delta(index, {"type": "input_json_delta", "partial_json": fragment})
        yield "body", _stop(index)
        index += 1
    delta = {"stop_reason": reply.stop_reason, "stop_sequence": None}
    usage = {"output_tokens": reply.output_tokens}
    message_delta = {"type": "message_delta", "delta": delta, "usage": usage}
    yield "final", sse_event("message_delta", message_delta)
    yield "final", sse_event("message_stop", {"type": "message_stop"})


def anthropic_unreasoned_end(reply: MockReply | None) -> bytes:
    """`message_stop` with no stop reason before it: after a `message_delta` that reports the
    usage of `reply` (its stop reason null), or alone."""
    stop = sse_event("message_stop", {"type": "message_stop"})
    if reply is None:
        return stop
    delta = {"stop_reason": None, "stop_sequence": None}
    usage = {"output_tokens": reply.output_tokens}
    return (
        sse_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}) + stop
    )


def anthropic_error(err_type: str, message: str, request_id: str, **details: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"type": err_type, "message": message}
    if details:
        error["details"] = details
    return {"type": "error", "error": error, "request_id": request_id}


def anthropic_midstream_error() -> bytes:
    return sse_event(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )


def anthropic_malformed() -> bytes:
    return (
        b"event: content_block_delta\n"
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_de\n\n'
    )


# --- OpenAI -------------------------------------------------------------------------------------


def openai_usage(reply: MockReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def openai_unreasoned_end(reply: MockReply | None) -> bytes:
    """`data: [DONE]` with no finish_reason before it: after a usage chunk for `reply` (as
    Snowflake Cortex ends its streams), or alone (as llama-cpp-python ends a stream it cut)."""
    if reply is None:
        return b"data: [DONE]\n\n"
    usage = {"object": "chat.completion.chunk", "choices": [], "usage": openai_usage(reply)}
    return sse_data(usage) + b"data: [DONE]\n\n"


def openai_completion(
    reply: MockReply, *, model: str, completion_id: str, created: int
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if reply.text_deltas else None,
    }
    if not reply.text_deltas and not reply.tool_calls:
        message["content"] = None if reply.refusal else ""
    message["refusal"] = reply.refusal or None
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _OPENAI_FINISH[reply.stop_reason],
            }
        ],
        "usage": openai_usage(reply),
    }


_SAFE = {"filtered": False, "severity": "safe"}
AZURE_FILTERS = {"hate": _SAFE, "self_harm": _SAFE, "sexual": _SAFE, "violence": _SAFE}


def openai_stream(
    reply: MockReply,
    *,
    model: str,
    completion_id: str,
    created: int,
    include_usage: bool,
    azure: bool = False,
) -> Iterator[Piece]:
    """Chat Completions chunks. `azure`: as Azure OpenAI streams them, a first chunk with only
    the prompt's content-filter results and filter results on every choice."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish,
        }
        if azure:
            choice["content_filter_results"] = AZURE_FILTERS if delta.get("content") else {}
        body: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": FINGERPRINT,
            "choices": [choice],
        }
        if include_usage:
            body["usage"] = None
        return sse_data(body)

    if azure:
        prompt = [{"prompt_index": 0, "content_filter_results": AZURE_FILTERS}]
        head = {"choices": [], "created": 0, "id": "", "model": "", "object": ""}
        yield "head", sse_data({**head, "prompt_filter_results": prompt})
    first_content = "" if reply.text_deltas or not reply.tool_calls else None
    yield "head", chunk({"role": "assistant", "content": first_content, "refusal": None})
    for piece in reply.text_deltas:
        yield "text", chunk({"content": piece})
    for piece in split_words(reply.refusal):
        yield "text", chunk({"refusal": piece})
    for i, call in enumerate(reply.tool_calls):
        function = {"name": call.name, "arguments": ""}
        yield (
            "body",
            chunk(
                {
                    "tool_calls": [
                        {"index": i, "id": call.id, "type": "function", "function": function}
                    ]
                }
            ),
        )
        for fragment in fragments(call.arguments):
            yield "body", chunk({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]})
    yield "final", chunk({}, _OPENAI_FINISH[reply.stop_reason])
    if include_usage:
        usage_chunk = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": FINGERPRINT,
            "choices": [],
            "usage": openai_usage(reply),
        }
        yield "final", sse_data(usage_chunk)
    yield "final", b"data: [DONE]\n\n"


def openai_error(
    message: str, err_type: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def openai_midstream_error() -> bytes:
    error = {
        "message": "The server is currently overloaded with other requests. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    return sse_data({"error": error})


def openai_malformed(completion_id: str) -> bytes:
    head = f'data: {{"id":"{completion_id}","object":"chat.completion.chunk",'
    return (head + '"choices":[{"index":0,"delta":{"content":"\n\n').encode()


# --- errors by status ---------------------------------------------------------------------------

_INJECTED = "Bad request (injected by the mock server's fault script)."
_RATE = "This request would exceed your organization's rate limit. Please retry after {retry}s."
_PERMISSION = "Your API key does not have permission to use the specified resource."
# status -> (Anthropic's error type, its message)
ANTHROPIC_STATUS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", _INJECTED),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the API."),
    403: ("permission_error", _PERMISSION),
    404: ("not_found_error", "model: {model}"),
    408: ("timeout_error", "Request timed out."),
    409: ("api_error", "Conflict."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", _RATE),
    500: ("api_error", "Internal server error"),
    502: ("api_error", "Bad gateway"),
    503: ("api_error", "Service unavailable"),
    504: ("timeout_error", "Request timed out."),
    529: ("overloaded_error", "Overloaded"),
}
_RATE_OPENAI = "Rate limit reached for requests. Please try again in {retry}s."
_NO_MODEL = "The model `{model}` does not exist or you do not have access to it."
_SORRY = "The server had an error while processing your request. Sorry about that!"
# status -> (OpenAI's error type, its code, its message)
OPENAI_STATUS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, _INJECTED),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    402: ("insufficient_quota", "insufficient_quota", "You have run out of credits."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Permission denied."),
    404: ("invalid_request_error", "model_not_found", _NO_MODEL),
    408: ("server_error", None, "Request timed out."),
    409: ("server_error", None, "Conflict."),
    413: ("invalid_request_error", None, "Request too large."),
    429: ("requests", "rate_limit_exceeded", _RATE_OPENAI),
    500: ("server_error", None, _SORRY),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "Service unavailable."),
    504: ("server_error", None, "Gateway timeout."),
    529: ("server_error", "overloaded", "The server is overloaded. Please try again later."),
}


def status_error(
    fmt: Format, status: int, *, model: str, request_id: str, retry: str = "1"
) -> dict[str, Any]:
    """The error body a provider sends with ``status``."""
    if fmt == "anthropic":
        a_type, a_msg = ANTHROPIC_STATUS.get(status, ANTHROPIC_STATUS[500])
        return anthropic_error(a_type, a_msg.format(model=model, retry=retry), request_id)
    o_type, o_code, o_msg = OPENAI_STATUS.get(status, OPENAI_STATUS[500])
    return openai_error(o_msg.format(model=model, retry=retry), o_type, o_code)


def quota_error(fmt: Format, request_id: str) -> dict[str, Any]:
    if fmt == "anthropic":
        return anthropic_error(
            "rate_limit_error",
            "You have reached your specified API usage limits. "
            "You will regain access on the first of next month.",
            request_id,
            error_code="enforced_spend_limit_reached",
        )
    return openai_error(
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
        "insufficient_quota",
    )


def overflow_error(fmt: Format, tokens: int, maximum: int, request_id: str) -> dict[str, Any]:
    """The real context-overflow error of each format, with the numbers in it."""
    if fmt == "anthropic":
        return anthropic_error(
            "invalid_request_error",
            f"prompt is too long: {tokens} tokens > {maximum} maximum",
            request_id,
        )
    return openai_error(
        f"This model's maximum context length is {maximum} tokens. "
        f"However, your messages resulted in {tokens} tokens. "
        "Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    )


def bad_request(
    fmt: Format, message: str, request_id: str, param: str | None = None
) -> dict[str, Any]:
    if fmt == "anthropic":
        return anthropic_error("invalid_request_error", message, request_id)
    return openai_error(message, "invalid_request_error", None, param)


def internal_error(fmt: Format, message: str, request_id: str) -> dict[str, Any]:
    if fmt == "anthropic":
        return anthropic_error("api_error", message, request_id)
    return openai_error(message, "server_error", None)


def not_found(fmt: Format, path: str, request_id: str) -> dict[str, Any]:
    if fmt == "anthropic":
        return anthropic_error("not_found_error", f"Not Found: {path}", request_id)
    return openai_error(f"Invalid URL (POST {path})", "invalid_request_error", None)
