"""The Anthropic Messages wire format for the mock server: replies and errors (its requests
are read in `_request_parsers`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._codec import Codec, Piece, PieceKind, fragments, json_or, sse_event
from ._conversation import Conversation, Format
from ._ratelimit import RateDecision, anthropic_headers
from ._reply import MockReply, split_words

_INJECTED = "Bad request (injected by the mock server's fault script)."
_RATE = "This request would exceed your organization's rate limit. Please retry after {retry}s."
_PERMISSION = "Your API key does not have permission to use the specified resource."
# status -> (Anthropic's error type, its message)
STATUS: dict[int, tuple[str, str]] = {
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


def _event(kind: str, **fields: Any) -> bytes:
    """One event of an Anthropic stream: its `type` is its name."""
    return sse_event(kind, {"type": kind, **fields})


# a content block: whole, as its stream starts it, and its stream's deltas
_Block = tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]


def _blocks(reply: MockReply) -> list[_Block]:
    """The reply's content blocks, each whole, as its stream starts it, and its deltas."""
    blocks: list[_Block] = []
    if reply.thinking_deltas:
        whole = {"type": "thinking", "thinking": reply.thinking, "signature": reply.signature}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in reply.thinking_deltas]
        deltas.append({"type": "signature_delta", "signature": reply.signature})
        blocks.append((whole, {**whole, "thinking": "", "signature": ""}, deltas))
    if reply.text_deltas:
        deltas = [{"type": "text_delta", "text": p} for p in reply.text_deltas]
        blocks.append(({"type": "text", "text": reply.text}, {"type": "text", "text": ""}, deltas))
    for call in reply.tool_calls:
        head = {"type": "tool_use", "id": call.id, "name": call.name}
        json_deltas = ["", *fragments(call.arguments)]
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in json_deltas]
        # [demo:bad_json] in a non-streaming reply: the raw text, not an object
        whole = {**head, "input": json_or(call.arguments, call.arguments)}
        blocks.append((whole, {**head, "input": {}}, deltas))
    return blocks


def _message_delta(stop_reason: str | None, reply: MockReply) -> bytes:
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    return _event("message_delta", delta=delta, usage={"output_tokens": reply.output_tokens})


_MESSAGE_STOP = _event("message_stop")


class AnthropicCodec(Codec):
    name: Format = "anthropic"
    id_header = "request-id"
    request_prefix = "req_011"
    message_prefix = "msg_"
    default_window = 200_000
    overflow_text = "prompt is too long: {tokens} tokens > {maximum} maximum"
    statuses = STATUS

    def whole(self, reply: MockReply, conv: Conversation, mid: str) -> dict[str, Any]:
        reply = _said(reply)
        return {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": conv.model,
            "content": [whole for whole, _, _ in _blocks(reply)],
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        }

    def stream(
        self, reply: MockReply, conv: Conversation, mid: str, azure: bool
    ) -> Iterator[Piece]:
        reply = _said(reply)
        start = self.whole(MockReply(input_tokens=reply.input_tokens), conv, mid)
        start.update(
            stop_reason=None, usage={"input_tokens": reply.input_tokens, "output_tokens": 1}
        )
        yield "head", _event("message_start", message=start)
        yield "head", _event("ping")
        for index, (_, started, deltas) in enumerate(_blocks(reply)):
            yield "body", _event("content_block_start", index=index, content_block=started)
            kind: PieceKind = "text" if started["type"] == "text" else "body"
            for delta in deltas:
                yield kind, _event("content_block_delta", index=index, delta=delta)
            yield "body", _event("content_block_stop", index=index)
        yield "final", _message_delta(reply.stop_reason, reply)
        yield "final", _MESSAGE_STOP

    def unreasoned_end(self, reply: MockReply | None) -> bytes:
        """`message_stop` with no stop reason before it: after a `message_delta` that reports
        the usage of `reply` (its stop reason null), or alone."""
        return _MESSAGE_STOP if reply is None else _message_delta(None, reply) + _MESSAGE_STOP

    # --- errors ---------------------------------------------------------------------------------

    def error(self, err_type: str, message: str, rid: str, **details: Any) -> dict[str, Any]:
        error: dict[str, Any] = {"type": err_type, "message": message}
        if details:
            error["details"] = details
        return {"type": "error", "error": error, "request_id": rid}

    def error_body(
        self, status: int, message: str, rid: str, param: str | None = None
    ) -> dict[str, Any]:
        return self.error(STATUS.get(status, STATUS[500])[0], message, rid)

    def quota_error(self, rid: str, model: str) -> dict[str, Any]:
        return self.error(
            "rate_limit_error",
            "You have reached your specified API usage limits. "
            "You will regain access on the first of next month.",
            rid,
            error_code="enforced_spend_limit_reached",
        )

    def midstream_error(self, mid: str) -> bytes:
        return _event("error", error={"type": "overloaded_error", "message": "Overloaded"})

    def malformed(self, mid: str) -> bytes:
        return (
            b"event: content_block_delta\n"
            b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_de\n\n'
        )

    def rate_headers(self, decision: RateDecision) -> dict[str, str]:
        return anthropic_headers(decision)


ANTHROPIC = AnthropicCodec()
