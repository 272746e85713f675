"""One attempt at a model request: the provider's stream, its deltas as events, its outcome.

Deltas are announced as they arrive (`TextDelta`, `ThinkingDelta`, `ToolCallDelta`) unless the
attempt is quiet (a summary for compaction). The attempt succeeds with the provider's one
`Completed`; it fails (`AttemptFailure`, carrying what had streamed, to be discarded) when the
stream breaks, ends without `Completed`, or completes with an empty message, and when a socket
error escapes the provider's own mapping (`TransportError`). Whatever happens, the provider's
stream (and with it the HTTP response) is closed now, not when the garbage collector gets to
it: a notebook keeps the last exception, and with it a suspended stream, alive.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from .._core._attempts import AttemptFailure, Sent
from .._core._clock import Clock
from .._core._messages import Message
from ..errors import EmptyResponse, StreamInterrupted, TransportError
from ..events import Event, TextDelta, ThinkingDelta, ToolCallDelta
from ..providers import (
    Completed,
    ModelRequest,
    Provider,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)


class Streamed:
    """A successful attempt: the provider's `Completed`, the time to its first part, and its
    structured answer once checked (`output=`)."""

    __slots__ = ("checked", "completed", "ttft_s")

    def __init__(self, completed: Completed, ttft_s: float | None) -> None:
        self.completed = completed
        self.ttft_s = ttft_s
        self.checked: Any = None

    def sent(self, note: str = "") -> Sent:
        """What the attempt loop announces of it (with `note` after the reading's own), and
        tells the pacer."""
        c = self.completed
        return Sent(
            c.usage,
            c.request_id,
            c.response_id,
            self.ttft_s,
            c.stop_reason,
            c.headers,
            "; ".join(m for m in (c.note, note) if m),
            c.status_code,
        )


# A reply cut off at max_tokens is asked for again by the run (LengthResumeExhausted when that
# keeps happening); a paused one (server tools at work) is sent back to be continued.
_MAY_BE_EMPTY = frozenset({"max_tokens", "pause_turn"})


def has_content(message: Message) -> bool:
    """Text or a tool call: thinking, redacted thinking and opaque provider state alone are
    not an answer (a reasoning-only reply would end the run with nothing to show)."""
    return bool(message.text.strip() or message.tool_uses)


def empty_reply(completed: Completed, provider: str) -> EmptyResponse | None:
    """The error of a reply with nothing in it (no text, no tool call), or None: the same test
    for a live reply and a batch item's."""
    if has_content(completed.message) or completed.stop_reason in _MAY_BE_EMPTY:
        return None
    return EmptyResponse(
        "the model returned an empty message",
        provider=provider,
        status_code=200,
        request_id=completed.request_id,
    )


def _quiet(event: Event) -> None:
    """Where a quiet attempt's deltas go: nowhere."""


async def stream_once(
    provider: Provider,
    request: ModelRequest,
    *,
    attempt: int,
    clock: Clock,
    emit: Callable[[Event], None] | None,
) -> Streamed:
    """Run one attempt; `emit=None` keeps it quiet (no delta events)."""
    tell = emit if emit is not None else _quiet
    text: list[str] = []
    thinking: list[str] = []
    t0 = clock.now()
    ttft: float | None = None
    completed: Completed | None = None
    stream = provider.stream(request)
    try:
        async for part in stream:
            if ttft is None:
                ttft = clock.now() - t0
            if isinstance(part, TextPart):
                text.append(part.text)
                tell(TextDelta(text=part.text, attempt=attempt))
            elif isinstance(part, ThinkingPart):
                thinking.append(part.text)
                tell(ThinkingDelta(text=part.text, attempt=attempt))
            elif isinstance(part, ToolCallPart):
                tell(
                    ToolCallDelta(
                        index=part.index,
                        call_id=part.call_id,
                        name=part.name,
                        arguments=part.arguments,
                        attempt=attempt,
                    )
                )
            elif isinstance(part, Completed):
                completed = part
        if completed is None:
            raise StreamInterrupted(
                "the stream ended without a final message", provider=provider.name
            )
        empty = empty_reply(completed, provider.name)
        if empty is not None:
            raise empty
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        err: Exception = exc
        if isinstance(exc, OSError):  # a socket error that escaped the provider's mapping
            err = TransportError(str(exc) or type(exc).__name__, provider=provider.name)
        raise AttemptFailure(
            err, text="".join(text), thinking="".join(thinking), ttft_s=ttft
        ) from exc
    finally:
        aclose = getattr(stream, "aclose", None)
        if callable(aclose):
            with contextlib.suppress(Exception):
                await aclose()
    return Streamed(completed, ttft)
