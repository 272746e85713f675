"""The OpenAI Responses wire format for the mock server: replies (the request parser, and the
encrypted reasoning it checks, are in `_request_parsers` and `_conversation.encrypted_for`).

`POST /v1/responses` (and Azure's `/openai/v1/responses`, `/openai/responses`). Replies stream
the documented event sequence: `response.created`, `in_progress`, each output item `added`, its
deltas and `done`, then `response.completed` (or `response.incomplete` at max_output_tokens).
When the request asks for `reasoning.encrypted_content`, each reply starts with a reasoning item
whose encrypted content the mock can verify; a request that sends one back altered is refused,
as OpenAI refuses it (`invalid_encrypted_content`), and one sent back without its encrypted
content is refused as OpenAI does with `store: false` (the item was never stored). Errors are
OpenAI's (`_openai_wire.OpenAIErrors`); mid-stream ones are an `error` event then `response.failed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ._codec import Piece, fragments, sse_event
from ._conversation import Conversation, Format, encrypted_for
from ._openai_wire import OVERLOADED, OpenAIErrors
from ._reply import MockReply, split_words

# --- replies ------------------------------------------------------------------------------------


def _items(reply: MockReply, conv: Conversation, response_id: str) -> list[dict[str, Any]]:
    """The reply's output items, finished."""
    suffix = response_id.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    if conv.thinking and not reply.is_empty:
        rid = f"rs_{suffix}"
        summary = [{"type": "summary_text", "text": reply.thinking}] if reply.thinking else []
        items.append(
            {
                "id": rid,
                "type": "reasoning",
                "encrypted_content": encrypted_for(rid),
                "summary": summary,
            }
        )
    message = {"id": f"msg_{suffix}", "type": "message", "role": "assistant"}
    if reply.refusal:  # a refusal is a content part of its own kind
        refused = [{"type": "refusal", "refusal": reply.refusal}]
        items.append({**message, "status": "completed", "content": refused})
    if reply.text_deltas:
        text = [{"type": "output_text", "annotations": [], "text": reply.text}]
        items.append({**message, "status": _status(reply), "content": text})
    for n, call in enumerate(reply.tool_calls):
        items.append(
            {
                "id": f"fc_{suffix}_{n}",
                "type": "function_call",
                "status": "completed",
                "arguments": call.arguments,
                "call_id": call.id,
                "name": call.name,
            }
        )
    return items


def _status(reply: MockReply) -> str:
    """How the reply ends: cut at max_output_tokens, or whole."""
    return "incomplete" if reply.stop_reason == "max_tokens" else "completed"


def _response(
    reply: MockReply, conv: Conversation, response_id: str, status: str, output: list[Any]
) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "status": status,
        "model": conv.model,
        "output": output,
        "store": False,
        "usage": None,
        "incomplete_details": None,
        "error": None,
    }
    if status in ("completed", "incomplete"):
        response["usage"] = {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }
    if status == "incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return response


class ResponsesCodec(OpenAIErrors):
    name: Format = "responses"
    message_prefix = "resp_"

    def whole(self, reply: MockReply, conv: Conversation, mid: str) -> dict[str, Any]:
        return _response(reply, conv, mid, _status(reply), _items(reply, conv, mid))

    def stream(
        self, reply: MockReply, conv: Conversation, mid: str, azure: bool
    ) -> Iterator[Piece]:
        seq = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            data = {"type": kind, "sequence_number": seq, **fields}
            seq += 1
            return sse_event(kind, data)

        started = _response(reply, conv, mid, "in_progress", [])
        yield "head", event("response.created", response=started)
        yield "head", event("response.in_progress", response=started)
        items = _items(reply, conv, mid)
        for index, item in enumerate(items):
            yield from _item_events(reply, item, index, event)
            yield "body", event("response.output_item.done", output_index=index, item=item)
        final = _response(reply, conv, mid, _status(reply), items)
        yield "final", event(f"response.{final['status']}", response=final)

    def midstream_error(self, mid: str) -> bytes:
        error = {"code": "server_error", "message": OVERLOADED}
        failed = {"id": mid, "object": "response", "status": "failed", "error": error}
        event = {"type": "error", "error": {"type": "server_error", **error, "param": None}}
        return sse_event("error", event) + sse_event(
            "response.failed", {"type": "response.failed", "response": failed}
        )

    def malformed(self, mid: str) -> bytes:
        return (
            b"event: response.output_text.delta\n"
            b'data: {"type":"response.output_text.delta","delta":"tru\n\n'
        )


def _item_events(
    reply: MockReply, item: dict[str, Any], index: int, event: Callable[..., bytes]
) -> Iterator[Piece]:
    """One output item's events, from `added` to before its `done`."""
    kind = item["type"]
    if kind == "message":
        added = {**item, "status": "in_progress", "content": []}
        yield "body", event("response.output_item.added", output_index=index, item=added)
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        done = item["content"][0]  # its one part: output_text, or a refusal
        name = done["type"]
        field = "refusal" if name == "refusal" else "text"
        pieces = split_words(reply.refusal) if name == "refusal" else reply.text_deltas
        yield "body", event("response.content_part.added", part={**done, field: ""}, **ids)
        for piece in pieces:
            yield "text", event(f"response.{name}.delta", delta=piece, **ids)
        yield "body", event(f"response.{name}.done", **{field: done[field]}, **ids)
        yield "body", event("response.content_part.done", part=done, **ids)
    elif kind == "function_call":
        added = {**item, "status": "in_progress", "arguments": ""}
        yield "body", event("response.output_item.added", output_index=index, item=added)
        ids = {"item_id": item["id"], "output_index": index}
        args = item["arguments"]
        for chunk in fragments(args):
            yield "body", event("response.function_call_arguments.delta", delta=chunk, **ids)
        yield "body", event("response.function_call_arguments.done", arguments=args, **ids)
    else:
        yield "body", event("response.output_item.added", output_index=index, item=item)


RESPONSES = ResponsesCodec()
