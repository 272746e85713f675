"""What the mock server answers, before it is put in a wire format: text, thinking, tool calls.

A responder (`Responder`) turns a parsed request (`Conversation`) into a `MockReply`. The demo
model (`nbagent.demo.demo_reply`) is the default responder: `import nbagent` registers it with
`set_default_responder`. Any other callable of the same shape may be given to `MockServer`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._conversation import Conversation

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]
"""Why a mock reply ends, in Anthropic's words (each wire format translates it; a refusal is
Anthropic's `stop_reason: refusal`, OpenAI's `refusal`, Gemini's `finishReason: SAFETY`)."""


@dataclass(frozen=True)
class MockToolCall:
    """A tool call the mock server streams back.

    Attributes:
        id: The call's id.
        name: The tool's name.
        arguments: The arguments' JSON text (deliberately invalid for `[demo:bad_json]`).
    """

    id: str
    name: str
    arguments: str  # JSON text; deliberately invalid for [demo:bad_json]


@dataclass(frozen=True)
class MockReply:
    """What a responder answers; the server streams it in the request's wire format, word by
    word, so faults can break it anywhere.

    Attributes:
        text_deltas: The answer's text, in the pieces it streams in.
        tool_calls: The tool calls, in order.
        stop_reason: Why it ends.
        thinking_deltas: Reasoning streamed before the text, in pieces.
        signature: The reasoning's signature.
        input_tokens: The prompt tokens it reports.
        output_tokens: The answer tokens it reports.
        refusal: The refusal's text when the model refuses (stop reason "refusal"), or "".
    """

    text_deltas: tuple[str, ...] = ()
    tool_calls: tuple[MockToolCall, ...] = ()
    stop_reason: StopReason = "end_turn"
    thinking_deltas: tuple[str, ...] = ()
    signature: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    refusal: str = ""  # the refusal's text, when the model refuses (stop_reason "refusal")

    @property
    def text(self) -> str:
        """The answer's text, whole."""
        return "".join(self.text_deltas)

    @property
    def thinking(self) -> str:
        """The reasoning, whole."""
        return "".join(self.thinking_deltas)

    @property
    def is_empty(self) -> bool:
        """Whether it has nothing in it (an empty answer)."""
        return not (self.text_deltas or self.tool_calls or self.thinking_deltas or self.refusal)


def split_words(text: str) -> tuple[str, ...]:
    """Word-sized deltas that join back to ``text`` exactly.

    Args:
        text: The text.

    Returns:
        The pieces: the first word, then each further word with its leading space.
    """
    if not text:
        return ()
    pieces = text.split(" ")
    return (pieces[0], *(" " + p for p in pieces[1:]))


Responder = Callable[[Conversation], MockReply]
"""Decides the mock's answer to a decoded request (the demo model is one)."""
_default: list[Responder] = []


def set_default_responder(responder: Responder) -> None:
    """Make `responder` answer for every mock server that was not given one.

    Args:
        responder: The responder (`import nbagent` registers the demo model).
    """
    _default[:] = [responder]


def default_responder() -> Responder:
    """The responder of every mock server that was not given one (the demo model, once
    `import nbagent` has registered it).

    Returns:
        The responder.

    Raises:
        RuntimeError: None is registered (nbagent was not imported).
    """

    if not _default:
        raise RuntimeError(
            "the mock server has no responder: pass MockServer(responder=...) or import nbagent, "
            "which registers the demo model"
        )
    return _default[0]
