"""The OpenAI Responses API, streamed (`POST {base_url}/responses`, `stream: true`).

Stateless on purpose: `store: false`, and for reasoning models
`include: ["reasoning.encrypted_content"]`, so each reasoning item comes back with its encrypted
content and is carried to the next request as it came (an `OpaqueBlock` tagged with the provider's
name: an item encrypted by one service means nothing to another); nothing needs to live on the
server. (A reasoning item without its encrypted content cannot be sent back with
`store: false`: the server would look it up and answer 404.) Non-reasoning models refuse that
`include`; pass `options={"include": [...]}` to choose it yourself.

Raw reasoning (DeepSeek, OpenRouter: `reasoning_text` deltas and a reasoning item whose `content`
holds `reasoning_text` parts, no `encrypted_content`) is thinking too, and its item goes back in
the next request with that content, as those servers expect.

Events: text deltas, reasoning summary and reasoning text deltas (thinking), function calls
with argument deltas (parallel calls by `output_index`), and the end: `response.completed`
(usage with cached and reasoning tokens), `response.incomplete` (`max_output_tokens` -> the
length path, `content_filter` -> `ContentFiltered`), `response.failed` and `error` events (the
documented flat shape and the nested one the recordings show), classified by their code like
HTTP errors: `rate_limit_exceeded` and `server_error` retry, `insufficient_quota` fails. A stream
that ends before one of the three ends broke.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._core._messages import (
    Block,
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..errors import ContentFiltered
from ._base import (
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from ._openai_chat import OpenAIFormat, data_url, tool_arguments, tool_output
from ._output_wire import add_responses_output
from ._parts import decode_arguments, json_object, whole_number
from ._sse import ServerSentEvent
from ._stream_ends import ErrorEvent, Reading, Refused
from ._whole_body import WholeEvents

RESPONSES = "openai-responses"
_RESERVED = frozenset({"model", "input", "instructions", "tools", "stream", "store"})
_REASONING = re.compile(r"(^|/)(o\d|gpt-5|codex|gpt-oss|computer-use)", re.I)


def is_reasoning_model(model: str) -> bool:
    """o-series, GPT-5 and codex models reason (and take `reasoning.encrypted_content`)."""
    return bool(_REASONING.search(model))


# -- serialisation ---------------------------------------------------------------------------


def _user_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for b in message.blocks:
        if isinstance(b, ToolResultBlock):
            output = tool_output(b)
            items.append(
                {"type": "function_call_output", "call_id": b.tool_use_id, "output": output}
            )
            content.extend(
                {"type": "input_image", "image_url": data_url(p)}
                for p in b.content
                if isinstance(p, ImageBlock)
            )
        elif isinstance(b, TextBlock) and b.text:
            content.append({"type": "input_text", "text": b.text})
        elif isinstance(b, ImageBlock):
            content.append({"type": "input_image", "image_url": data_url(b)})
    if content:
        items.append({"role": "user", "content": content})
    return items


def _assistant_items(message: Message, provider: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            items.append({"role": "assistant", "content": "".join(text)})
            text.clear()

    for b in message.blocks:
        if isinstance(b, TextBlock):
            text.append(b.text)
            continue
        if isinstance(b, OpaqueBlock) and b.provider == provider:
            flush()
            items.append(b.data)  # a reasoning item, exactly as it came
        elif isinstance(b, ToolUseBlock):
            flush()
            args = tool_arguments(b)
            items.append(
                {"type": "function_call", "call_id": b.id, "name": b.name, "arguments": args}
            )
    flush()
    return items


# -- streaming parse -------------------------------------------------------------------------


@dataclass
class _State(Reading):
    """What one answer's events have said so far (`ended`: one of its three ends came)."""

    items: dict[int, dict[str, Any]] = field(default_factory=dict)  # output_index -> final item
    added: dict[int, dict[str, Any]] = field(default_factory=dict)  # output_index -> first item
    text: dict[int, list[str]] = field(default_factory=dict)  # deltas, in case no item is done
    reasoning: dict[int, list[str]] = field(default_factory=dict)  # raw reasoning_text deltas
    args: dict[int, list[str]] = field(default_factory=dict)
    calls: dict[int, int] = field(default_factory=dict)  # output_index -> tool call number
    response: dict[str, Any] = field(default_factory=dict)
    MARKERS = ("response.completed", "end")  # `finish`: which of its three ends came

    def read(self, event: ServerSentEvent) -> None:
        if not event.data.strip() or event.data.strip() == "[DONE]":
            return
        data = self.es.json(event)
        kind = str(data.get("type") or event.event)
        if kind == "response.failed":
            error = json_object(data, "response").get("error")
            payload: Any = {"error": error} if isinstance(error, dict) else data
            raise ErrorEvent(payload, fallback_message="the response failed (response.failed)")
        if kind == "error":
            raise ErrorEvent(data)
        handler = self.handlers.get(kind)
        if handler is not None:
            handler(self, data, whole_number(data.get("output_index")))

    def item_added(self, data: dict[str, Any], index: int | None) -> None:
        item = data.get("item")
        if index is not None and isinstance(item, dict):
            self.added[index] = item
            if item.get("type") == "function_call":
                number = self.calls.setdefault(index, len(self.calls))
                call_id, name = str(item.get("call_id") or ""), str(item.get("name") or "")
                self.buf.add(ToolCallPart(number, call_id, name, ""))

    def item_done(self, data: dict[str, Any], index: int | None) -> None:
        item = data.get("item")
        if index is not None and isinstance(item, dict):
            self.items[index] = item

    def text_delta(self, data: dict[str, Any], index: int | None) -> None:
        delta = data.get("delta")
        if index is not None and isinstance(delta, str) and delta:
            self.text.setdefault(index, []).append(delta)
            self.buf.add(TextPart(delta))

    def summary_delta(self, data: dict[str, Any], index: int | None) -> None:
        delta = data.get("delta")
        if isinstance(delta, str) and delta:
            self.buf.add(ThinkingPart(delta))

    def reasoning_delta(self, data: dict[str, Any], index: int | None) -> None:
        delta = data.get("delta")
        if isinstance(delta, str) and delta:
            if index is not None:
                self.reasoning.setdefault(index, []).append(delta)
            self.buf.add(ThinkingPart(delta))

    def arguments_delta(self, data: dict[str, Any], index: int | None) -> None:
        delta = data.get("delta")
        if index is not None and isinstance(delta, str) and delta:
            self.args.setdefault(index, []).append(delta)
            number = self.calls.setdefault(index, len(self.calls))
            self.buf.add(ToolCallPart(number, arguments=delta))

    def ends(self, data: dict[str, Any], index: int | None) -> None:
        self.finish = str(data.get("type") or "")
        self.ended = True
        self.response = json_object(data, "response")
        self.named(self.response.get("model"), self.response.get("id"))
        usage = self.response.get("usage")  # its input counts the cached input
        self.counted(usage, "input_tokens", "output_tokens", "input_tokens_details")

    def final_items(self) -> list[dict[str, Any]]:
        """Each output item as the server finished it; the response's own list, or the deltas,
        for any the stream did not finish (an incomplete answer)."""
        output = self.response.get("output")
        listed = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
        indices = sorted(set(self.items) | set(self.added) | set(range(len(listed))))
        items: list[dict[str, Any]] = []
        for i in indices:
            if i in self.items:
                item = self.items[i]
            elif i < len(listed):
                item = listed[i]
            else:  # only its first sight (the indices come from these three)
                item = dict(self.added[i])
            kind = item.get("type")
            if kind == "reasoning":
                item = _with_reasoning_text(item, self.reasoning.get(i))
            elif i not in self.items and i >= len(listed):  # only the first sight of it
                if kind == "message":
                    text = "".join(self.text.get(i, []))
                    item["content"] = [{"type": "output_text", "text": text}]
                elif kind == "function_call":
                    item["arguments"] = "".join(self.args.get(i, []))
            items.append(item)
        return items

    def result(self) -> tuple[list[Block], str, str]:
        response = self.response
        reason = json_object(response, "incomplete_details").get("reason")
        if self.finish == "response.incomplete" and reason == "content_filter":
            raise Refused(
                ContentFiltered,
                "the provider's content filter stopped the answer (response.incomplete)",
                code="content_filter",
            )
        blocks: list[Block] = []
        refusal: list[str] = []
        calls = 0
        for item in self.final_items():
            kind = item.get("type")
            if kind == "reasoning":
                # a summary (OpenAI), or the raw reasoning text itself (DeepSeek, OpenRouter)
                reasoning = _summary(item, "content")
                thought = _summary(item) or reasoning
                if thought:
                    blocks.append(ThinkingBlock(thought))
                if item.get("encrypted_content") or reasoning:
                    # sent back as it came: encrypted content, or the reasoning text in it
                    blocks.append(OpaqueBlock(self.es.provider, item))
            elif kind == "message":
                for part in item.get("content") or ():
                    if not isinstance(part, dict):
                        continue
                    if part.get("type") == "output_text" and part.get("text"):
                        blocks.append(TextBlock(str(part["text"])))
                    elif part.get("type") == "refusal" and part.get("refusal"):
                        refusal.append(str(part["refusal"]))
            elif kind == "function_call":
                args, raw = decode_arguments(str(item.get("arguments") or ""))
                call_id = str(item.get("call_id") or item.get("id") or f"call_{calls}")
                blocks.append(ToolUseBlock(call_id, str(item.get("name") or ""), args, raw))
                calls += 1
        if refusal:
            raise Refused(ContentFiltered, "".join(refusal), code="refusal")
        stop = "tool_use" if calls else "end_turn"
        if self.finish == "response.incomplete" and reason == "max_output_tokens":
            stop = "max_tokens"
        return blocks, stop, ""

    handlers: ClassVar[dict[str, Callable[[_State, dict[str, Any], int | None], None]]] = {
        "response.output_item.added": item_added,
        "response.output_item.done": item_done,
        "response.output_text.delta": text_delta,
        "response.reasoning_summary_text.delta": summary_delta,
        "response.reasoning_text.delta": reasoning_delta,
        "response.function_call_arguments.delta": arguments_delta,
        "response.completed": ends,
        "response.incomplete": ends,
    }


def _summary(item: dict[str, Any], key: str = "summary") -> str:
    """The text of a reasoning item's `summary` parts (or, with key="content", of the raw
    `reasoning_text` parts DeepSeek and OpenRouter send)."""
    parts = item.get(key)
    texts = [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    return "\n\n".join(t for t in texts if isinstance(t, str) and t)


def _with_reasoning_text(item: dict[str, Any], deltas: list[str] | None) -> dict[str, Any]:
    """A reasoning item whose raw text came only as deltas, with that text as its content."""
    if not deltas or _summary(item, "content"):
        return item
    return {**item, "content": [{"type": "reasoning_text", "text": "".join(deltas)}]}


class ResponsesProvider(OpenAIFormat):
    """Streams OpenAI models through the Responses API ("openai-responses:..." model strings;
    Azure's is `AzureResponsesProvider`).

    Attributes:
        default_base_url: OpenAI's https://api.openai.com/v1, when no `base_url` is given.
        default_name: "openai-responses", in model strings and the attempt log.
        batch_endpoint: "/v1/responses", the `url` each item of a batch names.
        stream_markers: What the events that end its answers hold (for a watcher).
    """

    default_name = RESPONSES
    batch_endpoint = "/v1/responses"
    _path = "/responses"
    stream_markers = (b"response.completed", b"response.failed", b"response.incomplete", b"error")
    _reading = _State

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of `request` as a stateless Responses request (the module docstring).

        Args:
            request: The conversation, system prompt, tools and settings.

        Returns:
            The body, before encoding: `input` items, `instructions`, `tools`, the output
            format, `store: false` and the encrypted reasoning a reasoning model sends back.
        """
        body: dict[str, Any] = {k: v for k, v in request.options.items() if k not in _RESERVED}
        body.setdefault("max_output_tokens", request.max_tokens)
        if "include" not in body and is_reasoning_model(self.model):
            body["include"] = ["reasoning.encrypted_content"]
        body["model"] = self.model
        if request.system:
            body["instructions"] = request.system
        items: list[dict[str, Any]] = []
        for m in request.messages:
            items += _assistant_items(m, self.name) if m.role == "assistant" else _user_items(m)
        body["input"] = items
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                    "strict": False,
                }
                for t in request.tools
            ]
        add_responses_output(body, request.output)
        body["store"] = False
        body["stream"] = True
        return body

    def whole_events(self, response: dict[str, Any]) -> WholeEvents:
        """A Responses `response` as its terminal event (which carries the whole response).

        Args:
            response: The whole Responses answer.

        Returns:
            One event: `response.completed`, `.incomplete` or `.failed`, by its status.
        """
        status = response.get("status")
        kind = f"response.{status if status in ('incomplete', 'failed') else 'completed'}"
        return [(kind, {"type": kind, "response": response})]
