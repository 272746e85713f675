"""The faults of a structured answer: `invalid_json`, `schema_mismatch`, `refusal`, `truncated`.

Each changes what the responder answered before it is put on the wire. The answer is the text,
or the forced tool's arguments when the request forced one (`Conversation.forced_tool`):

* `invalid_json`: the answer cut in half and left open, so it is not JSON;
* `schema_mismatch`: valid JSON off the schema: every property of the wrong type, and one the
  schema does not have;
* `refusal`: a refusal in the format's own way (Anthropic `stop_reason: refusal`, OpenAI's
  `refusal` field or content part, Gemini's `finishReason: SAFETY`);
* `truncated`: the answer cut at the request's max_tokens, with the format's length stop.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ._conversation import Conversation
from ._faults import ANSWER_KINDS
from ._output_request import ANY_TOOL
from ._reply import MockReply, MockToolCall, Responder, split_words

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."


# a value of the wrong type for each JSON Schema type (a string for those not listed)
_WRONG: dict[str, Any] = {
    "integer": "not a number",
    "number": "not a number",
    "boolean": "maybe",
    "array": {"not": "a list"},
    "object": ["not", "an", "object"],
}


def _wrong(schema: Any) -> Any:
    """A value of the wrong type for `schema`."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return _WRONG.get(kind, 12345) if isinstance(kind, str) else 12345


def mismatching(schema: dict[str, Any] | None, extra: str = "unexpected_field") -> Any:
    """Valid JSON that breaks `schema`: every property of the wrong type and one that is not
    in it, named `extra` (or, with no schema, an object of that one field)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    wrong: dict[str, Any] = {}
    for name, prop in (props if isinstance(props, dict) else {}).items():
        wrong[name] = _wrong(prop)
    wrong[extra] = True
    return wrong


def _answer_call(reply: MockReply, conv: Conversation) -> int | None:
    """Which of the reply's tool calls is the forced answer, if the request forced one."""
    if conv.forced_tool is None:
        return None
    for i, call in enumerate(reply.tool_calls):
        if conv.forced_tool in (call.name, ANY_TOOL):
            return i
    return None


def _replace_answer(reply: MockReply, index: int | None, text: str, **changes: Any) -> MockReply:
    """`reply` with its answer (the text, or tool call `index`'s arguments) made `text`."""
    if index is None:
        return dataclasses.replace(reply, text_deltas=split_words(text), **changes)
    calls = list(reply.tool_calls)
    calls[index] = MockToolCall(calls[index].id, calls[index].name, text)
    return dataclasses.replace(reply, tool_calls=tuple(calls), **changes)


def answer_fault(kind: str, reply: MockReply, conv: Conversation) -> MockReply:
    """The responder's `reply` with the answer fault `kind` applied.

    Args:
        kind: A fault kind: `invalid_json`, `schema_mismatch`, `refusal` or `truncated` (any
            other kind leaves the reply as it is).
        reply: What the responder answered.
        conv: The request it answered (its schema, forced tool and max_tokens).

    Returns:
        The reply to put on the wire.
    """
    if kind not in ANSWER_KINDS:
        return reply
    if kind == "refusal":
        return MockReply(
            refusal=REFUSAL_TEXT,
            stop_reason="refusal",
            input_tokens=reply.input_tokens,
            output_tokens=max(1, len(REFUSAL_TEXT) // 4),
        )
    index = _answer_call(reply, conv)
    answer = reply.tool_calls[index].arguments if index is not None else reply.text
    answer = answer or json.dumps({"answer": "x" * 40})
    if kind == "invalid_json":
        broken = answer[: max(1, len(answer) // 2)] + ' "and then'
        return _replace_answer(reply, index, broken)
    if kind == "schema_mismatch":
        schema = conv.output_schema
        if schema is None and index is not None:  # the schema of the tool called
            schema = conv.tools.get(reply.tool_calls[index].name)
        return _replace_answer(reply, index, json.dumps(mismatching(schema)))
    # truncated: the answer cut at the request's max_tokens
    cut = answer[: max(1, len(answer) // 2)]
    used = conv.max_tokens or reply.output_tokens
    return _replace_answer(reply, index, cut, stop_reason="max_tokens", output_tokens=used)


def faulted_reply(kind: str, responder: Responder, conv: Conversation) -> MockReply:
    """What a request with the fault `kind` is answered (a live one or a batch item): an empty
    answer for ``empty``, else the responder's with the answer fault applied."""
    if kind == "empty":
        return MockReply(input_tokens=conv.prompt_tokens)
    return answer_fault(kind, responder(conv), conv)
