"""The OpenAI Chat Completions wire format for the mock server: replies and errors (its
requests are read in `_request_parsers`; the Responses format shares the errors)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from ._codec import Codec, Piece, fragments, sse_data
from ._conversation import Conversation, Format
from ._ratelimit import RateDecision, openai_headers
from ._reply import MockReply, MockToolCall, split_words

FINGERPRINT = "fp_nbagent_demo"
_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "stop",  # a refusal is the `refusal` field, with an ordinary stop
}
_SAFE = {"filtered": False, "severity": "safe"}
AZURE_FILTERS = {"hate": _SAFE, "self_harm": _SAFE, "sexual": _SAFE, "violence": _SAFE}
_DONE = b"data: [DONE]\n\n"
_INJECTED = "Bad request (injected by the mock server's fault script)."
_RATE = "Rate limit reached for requests. Please try again in {retry}s."
_NO_MODEL = "The model `{model}` does not exist or you do not have access to it."
_SORRY = "The server had an error while processing your request. Sorry about that!"
OVERLOADED = "The server is currently overloaded with other requests. Sorry about that!"
# status -> (OpenAI's error type, its code, its message)
STATUS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, _INJECTED),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    402: ("insufficient_quota", "insufficient_quota", "You have run out of credits."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Permission denied."),
    404: ("invalid_request_error", "model_not_found", _NO_MODEL),
    408: ("server_error", None, "Request timed out."),
    409: ("server_error", None, "Conflict."),
    413: ("invalid_request_error", None, "Request too large."),
    429: ("requests", "rate_limit_exceeded", _RATE),
    500: ("server_error", None, _SORRY),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "Service unavailable."),
    504: ("server_error", None, "Gateway timeout."),
    529: ("server_error", "overloaded", "The server is overloaded. Please try again later."),
}


def usage(reply: MockReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _tool_call(call: MockToolCall, arguments: str) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _choice(key: str, value: dict[str, Any], finish: str | None) -> dict[str, Any]:
    """The one choice of a completion (`key` "message") or of a chunk (`key` "delta")."""
    return {"index": 0, key: value, "logprobs": None, "finish_reason": finish}


def error(
    message: str, err_type: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


class OpenAIErrors(Codec):
    """OpenAI's error bodies and rate-limit headers (Chat Completions and Responses)."""

    statuses = STATUS

    def error_body(
        self, status: int, message: str, rid: str, param: str | None = None
    ) -> dict[str, Any]:
        err_type, code, _ = STATUS.get(status, STATUS[500])
        return error(message, err_type, code, param)

    def quota_error(self, rid: str, model: str) -> dict[str, Any]:
        message = "You exceeded your current quota, please check your plan and billing details."
        return self.error_body(402, message, rid)

    def overflow_error(self, tokens: int, maximum: int, rid: str) -> dict[str, Any]:
        return error(
            f"This model's maximum context length is {maximum} tokens. "
            f"However, your messages resulted in {tokens} tokens. "
            "Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        )

    def not_found(self, path: str, rid: str) -> dict[str, Any]:
        return error(f"Invalid URL (POST {path})", "invalid_request_error", None)

    def rate_headers(self, decision: RateDecision) -> dict[str, str]:
        return openai_headers(decision)


class OpenAICodec(OpenAIErrors):
    name: Format = "openai"
    message_prefix = "chatcmpl-"

    def whole(self, reply: MockReply, conv: Conversation, mid: str) -> dict[str, Any]:
        said = reply.text_deltas or not (reply.tool_calls or reply.refusal)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if said else None,
            "refusal": reply.refusal or None,
        }
        if reply.tool_calls:
            message["tool_calls"] = [_tool_call(c, c.arguments) for c in reply.tool_calls]
        choice = _choice("message", message, _FINISH[reply.stop_reason])
        return {
            **self._head(conv, mid, "chat.completion"),
            "choices": [choice],
            "usage": usage(reply),
        }

    def _head(self, conv: Conversation, mid: str, kind: str) -> dict[str, Any]:
        return {
            "id": mid,
            "object": kind,
            "created": int(time.time()),
            "model": conv.model,
            "system_fingerprint": FINGERPRINT,
        }

    def stream(
        self, reply: MockReply, conv: Conversation, mid: str, azure: bool
    ) -> Iterator[Piece]:
        """Chat Completions chunks. `azure`: as Azure OpenAI streams them, a first chunk with
        only the prompt's content-filter results and filter results on every choice."""
        head = self._head(conv, mid, "chat.completion.chunk")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = _choice("delta", delta, finish)
            if azure:
                choice["content_filter_results"] = AZURE_FILTERS if delta.get("content") else {}
            body: dict[str, Any] = {**head, "choices": [choice]}
            if conv.include_usage:
                body["usage"] = None
            return sse_data(body)

        if azure:
            prompt = [{"prompt_index": 0, "content_filter_results": AZURE_FILTERS}]
            empty = {"choices": [], "created": 0, "id": "", "model": "", "object": ""}
            yield "head", sse_data({**empty, "prompt_filter_results": prompt})
        first_content = "" if reply.text_deltas or not reply.tool_calls else None
        yield "head", chunk({"role": "assistant", "content": first_content, "refusal": None})
        for piece in reply.text_deltas:
            yield "text", chunk({"content": piece})
        for piece in split_words(reply.refusal):
            yield "text", chunk({"refusal": piece})
        for i, call in enumerate(reply.tool_calls):
            yield "body", chunk({"tool_calls": [{"index": i, **_tool_call(call, "")}]})
            for fragment in fragments(call.arguments):
                part = {"index": i, "function": {"arguments": fragment}}
                yield "body", chunk({"tool_calls": [part]})
        yield "final", chunk({}, _FINISH[reply.stop_reason])
        if conv.include_usage:
            yield "final", sse_data({**head, "choices": [], "usage": usage(reply)})
        yield "final", _DONE

    def unreasoned_end(self, reply: MockReply | None) -> bytes:
        """`data: [DONE]` with no finish_reason before it: after a usage chunk for `reply` (as
        Snowflake Cortex ends its streams), or alone (as llama-cpp-python ends a stream it
        cut)."""
        if reply is None:
            return _DONE
        return (
            sse_data({"object": "chat.completion.chunk", "choices": [], "usage": usage(reply)})
            + _DONE
        )

    def midstream_error(self, mid: str) -> bytes:
        return sse_data({"error": error(OVERLOADED, "server_error", None)["error"]})

    def malformed(self, mid: str) -> bytes:
        head = f'data: {{"id":"{mid}","object":"chat.completion.chunk",'
        return (head + '"choices":[{"index":0,"delta":{"content":"\n\n').encode()


OPENAI = OpenAICodec()
