"""OpenAI Chat Completions, streamed (`POST {base_url}/chat/completions`, `stream: true`).

The same wire format serves OpenAI, OpenRouter, Ollama (`/v1`), llama.cpp server and vLLM:
only the base URL, the key and `name` differ. Reasoning text that these servers stream as
`reasoning` / `reasoning_content` becomes thinking.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._core._messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..errors import ContentFiltered
from ._base import (
    Dialect,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from ._client import at_openai
from ._http import HTTPProvider
from ._openai_batch import OpenAIBatches
from ._output_wire import add_openai_output
from ._parts import decode_arguments, json_object, whole_number
from ._sse import ServerSentEvent
from ._stream_ends import ErrorEvent, Reading, Refused
from ._whole_body import NotAnAnswer, WholeEvents

_FINISH = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "stop_sequence": "stop_sequence",
    "end_turn": "end_turn",
    "eos": "end_turn",
}
_RESERVED = frozenset({"model", "messages", "tools", "stream"})


def filtered_categories(results: Any) -> set[str]:
    """The categories Azure's content filter results mark `filtered: true`: one object of
    categories, or a list of `{"content_filter_results": {...}}` (one per prompt)."""
    out: set[str] = set()
    if isinstance(results, list):
        for item in results:
            if isinstance(item, dict):
                out |= filtered_categories(item.get("content_filter_results"))
    elif isinstance(results, dict):
        for name, verdict in results.items():
            if isinstance(verdict, dict) and verdict.get("filtered") is True:
                severity = verdict.get("severity")
                out.add(f"{name} ({severity})" if isinstance(severity, str) else str(name))
    return out


# -- serialisation ---------------------------------------------------------------------------


def data_url(block: ImageBlock) -> str:
    """An image as the `data:` URL both OpenAI formats carry it in."""
    return f"data:{block.media_type};base64,{block.data}"


def _user_content(parts: list[TextBlock | ImageBlock]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextBlock) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextBlock))
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextBlock):
            if p.text:
                out.append({"type": "text", "text": p.text})
        else:
            out.append({"type": "image_url", "image_url": {"url": data_url(p)}})
    return out


def tool_arguments(block: ToolUseBlock) -> str:
    """A tool call's arguments as both OpenAI formats carry them: JSON text (the text it came
    as, when it was not a JSON object)."""
    if block.raw_input is not None and not block.input:
        return block.raw_input
    return json.dumps(block.input, ensure_ascii=False)


def tool_output(block: ToolResultBlock) -> str:
    """A tool result's text as both OpenAI formats carry it (an error's marked as one)."""
    if not block.is_error:
        return block.text
    return f"Error: {block.text}" if block.text else "Error"


def messages_to_openai(messages: tuple[Message, ...], system: str | None) -> list[dict[str, Any]]:
    """Chat Completions messages: a system message, user/assistant turns, `role: tool` results."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "assistant":
            text = "".join(b.text for b in message.blocks if isinstance(b, TextBlock))
            calls = [
                {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": tool_arguments(b)},
                }
                for b in message.blocks
                if isinstance(b, ToolUseBlock)
            ]
            # a turn of tool calls only says "content": "", never null: llama.cpp's server
            # answers null with HTTP 500 (its validation), and the API allows the empty string
            d: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                d["tool_calls"] = calls
            out.append(d)
            continue
        # user: tool results first (they must follow the assistant's tool_calls), then the rest
        rest: list[TextBlock | ImageBlock] = []
        for b in message.blocks:
            if isinstance(b, ToolResultBlock):
                out.append(
                    {"role": "tool", "tool_call_id": b.tool_use_id, "content": tool_output(b)}
                )
                # tool messages carry text only: images a tool returned follow as user content
                rest.extend(p for p in b.content if isinstance(p, ImageBlock))
            elif isinstance(b, (TextBlock, ImageBlock)):
                rest.append(b)
        if rest:
            out.append({"role": "user", "content": _user_content(rest)})
    return out


# -- streaming parse -------------------------------------------------------------------------


@dataclass
class _Call:
    index: int
    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)


@dataclass
class _ChatReading(Reading):
    """What one answer's chunks have said so far (of its first choice; `ended`: [DONE] came)."""

    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    flagged: set[str] = field(default_factory=set)  # content-filter categories that filtered
    MARKERS = ("data: [DONE]", "finish_reason")

    def read(self, event: ServerSentEvent) -> None:
        """One chunk: an error, or the head and the first choice's delta and finish reason."""
        if event.data.strip() == "[DONE]":
            self.ended = True
            return
        if not event.data.strip():
            return
        data = self.es.json(event)
        if event.event == "error" or data.get("error"):
            raise ErrorEvent(data if "error" in data else {"error": data})
        self.head(data)
        self.flagged |= filtered_categories(data.get("prompt_filter_results"))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return
        choice = choices[0]
        if not isinstance(choice, dict):
            raise self.es.bad_data(event, "a choice is not an object")
        self.flagged |= filtered_categories(choice.get("content_filter_results"))
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self.delta(delta)
        fr = choice.get("finish_reason")
        if isinstance(fr, str) and fr:
            self.finish = fr

    def result(self) -> tuple[list[Block], str, str]:
        es, finish, flagged = self.es, self.finish, self.flagged
        text, thinking, refusal, calls = self.text, self.thinking, self.refusal, self.calls
        note = ""
        if finish is None:
            if not (text or calls or refusal):
                raise es.interrupted("the stream ended without a finish_reason")
            # Some servers (Snowflake Cortex) end a whole answer with usage and [DONE] but never
            # name a finish reason: read as "stop" (one with no usage either was cut: Reading.end)
            finish = "stop"
            note = "the stream ended with data: [DONE] but no finish_reason; read as stop"
        if finish == "content_filter" or refusal:
            why = "".join(refusal) or "the provider's content filter stopped the answer"
            if flagged:
                why += f" (filtered: {', '.join(sorted(flagged))})"
            code = "content_filter" if finish == "content_filter" else "refusal"
            raise Refused(ContentFiltered, why, code=code)
        if finish == "error":
            raise es.interrupted("the provider ended the stream with finish_reason: error")
        blocks: list[Block] = []
        if thinking:
            blocks.append(ThinkingBlock("".join(thinking)))
        if text:
            blocks.append(TextBlock("".join(text)))
        for index in sorted(calls):
            call = calls[index]
            args, raw = decode_arguments("".join(call.args))
            blocks.append(ToolUseBlock(call.id or f"call_{index}", call.name, args, raw))
        stop_reason = _FINISH.get(finish, "end_turn")
        if calls and stop_reason == "end_turn":
            stop_reason = "tool_use"  # some servers say "stop" after tool calls
        return blocks, stop_reason, note

    def head(self, data: dict[str, Any]) -> None:
        """A chunk's model, id and usage report."""
        self.named(data.get("model"), data.get("id"))
        usage = data.get("usage")
        self.counted(usage, "prompt_tokens", "completion_tokens", "prompt_tokens_details")

    def delta(self, delta: dict[str, Any]) -> None:
        """The first choice's delta: reasoning, text, a refusal, tool-call fragments."""
        buf = self.buf
        for key in ("reasoning_content", "reasoning"):
            r = delta.get(key)
            if isinstance(r, str) and r:
                self.thinking.append(r)
                buf.add(ThinkingPart(r))
                break
        c = delta.get("content")
        if isinstance(c, str) and c:
            self.text.append(c)
            buf.add(TextPart(c))
        ref = delta.get("refusal")
        if isinstance(ref, str) and ref:
            self.refusal.append(ref)
        tcs = delta.get("tool_calls")
        for tc in tcs if isinstance(tcs, list) else ():
            if isinstance(tc, dict):
                call_part = self.tool_delta(tc)
                if call_part is not None:
                    buf.add(call_part)

    def tool_delta(self, tc: dict[str, Any]) -> ToolCallPart | None:
        calls = self.calls
        index = whole_number(tc.get("index"))
        call_id = tc.get("id") if isinstance(tc.get("id"), str) else ""
        if index is None:  # servers that leave out the index: a new id starts a new call
            known = [c for c in calls.values() if call_id and c.id == call_id]
            if known:
                index = known[0].index
            elif call_id or not calls:
                index = len(calls)
            else:
                index = max(calls)
        fn = json_object(tc, "function")
        name = fn.get("name") if isinstance(fn.get("name"), str) else ""
        args = fn.get("arguments")
        if isinstance(args, dict):  # a few servers send the object itself
            args = json.dumps(args)
        args = args if isinstance(args, str) else ""
        new = index not in calls
        call = calls.setdefault(index, _Call(index))
        if call_id and not call.id:
            call.id = call_id
        if name and not call.name:
            call.name = name
        if args:
            call.args.append(args)
        if new or args:
            return ToolCallPart(index, call_id or "", name or "", args)
        return None


class OpenAIFormat(HTTPProvider):
    """What both OpenAI wire formats (Chat Completions, Responses) share: OpenAI's endpoint, its
    batch API (OpenAI's own: OpenRouter, Ollama and local servers speak the formats without it)
    and the output dialect.

    Attributes:
        default_base_url: OpenAI's https://api.openai.com/v1, when no `base_url` is given.
    """

    default_base_url = "https://api.openai.com/v1"
    _batch_class: type[Any] | None = OpenAIBatches
    _batch_home_only = True

    @property
    def output_dialect(self) -> Dialect:
        """OpenAI's own API takes strict schemas; any other server speaking the format is asked
        with `strict: false` and the schema as it is (llama.cpp, vLLM, Ollama, OpenRouter)."""
        return "openai" if at_openai(self.base_url) else "openai-compatible"


class OpenAIProvider(OpenAIFormat):
    """Streams any Chat Completions server: OpenAI, OpenRouter, Ollama, llama.cpp, vLLM
    (`resolve_model` makes one for "openai:...", "openrouter:...", "ollama:..." and the rest).

    Attributes:
        default_base_url: OpenAI's https://api.openai.com/v1, when no `base_url` is given.
        default_name: "openai", in model strings and the attempt log (or the name given).
        batch_endpoint: "/v1/chat/completions", the `url` each item of a batch names.
        stream_markers: What the events that end its answers hold (for a watcher).
    """

    default_name = "openai"
    batch_endpoint = "/v1/chat/completions"
    _path = "/chat/completions"
    _reading = _ChatReading
    stream_markers = (
        b"[DONE]",
        b'"finish_reason":"',
        b'"finish_reason": "',
        b'"usage":{',
        b'"usage": {',
        b'"error"',
    )

    @property
    def _max_tokens_key(self) -> str:
        """Which field carries the output cap, decided by the endpoint, not the provider's name.

        OpenAI's own API (api.openai.com) requires `max_completion_tokens` for its reasoning
        models (Azure's provider sends it too); every other server speaking this format
        (llama.cpp, llama-cpp-python, vLLM, Ollama, LM Studio, gateways) reads `max_tokens`, and
        would ignore the other and generate until its context is full: `Agent("openai:...",
        base_url=<local server>)` talks to such a server, so its cap goes in `max_tokens`.
        """
        return "max_completion_tokens" if at_openai(self.base_url) else "max_tokens"

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body this wire format sends for `request` (Chat Completions).

        Args:
            request: The conversation, system prompt, tools and settings.

        Returns:
            The body, before encoding.
        """
        body: dict[str, Any] = {k: v for k, v in request.options.items() if k not in _RESERVED}
        if "max_tokens" not in body and "max_completion_tokens" not in body:
            body[self._max_tokens_key] = request.max_tokens
        body["model"] = self.model
        body["messages"] = messages_to_openai(request.messages, request.system)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        add_openai_output(body, request.output)
        body["stream"] = True
        options = body.get("stream_options")
        body["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
        return body

    def whole_events(self, completion: dict[str, Any]) -> WholeEvents:
        """A `chat.completion` as the one chunk that carries all of it, then `[DONE]`.

        Args:
            completion: The whole `chat.completion`.

        Returns:
            The events: the chunk (its first choice's message as the delta), then `[DONE]`.

        Raises:
            NotAnAnswer: The first choice is not an object.
        """
        choices = completion.get("choices")
        kept = ("id", "model", "usage", "prompt_filter_results")
        chunk: dict[str, Any] = {k: completion[k] for k in kept if k in completion}
        chunk["choices"] = []
        if isinstance(choices, list) and choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                raise NotAnAnswer("a choice that is not an object")
            message = json_object(choice, "message")
            delta = {
                k: message[k]
                for k in ("role", "content", "refusal", "reasoning_content", "reasoning")
                if message.get(k) is not None
            }
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                delta["tool_calls"] = [
                    {**call, "index": i} for i, call in enumerate(calls) if isinstance(call, dict)
                ]
            streamed = {"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}
            if "content_filter_results" in choice:
                streamed["content_filter_results"] = choice["content_filter_results"]
            chunk["choices"] = [streamed]
        return [("", chunk), ("", "[DONE]")]
