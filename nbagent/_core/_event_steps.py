"""The events of a run's steps besides its attempts: compaction, tool calls, committed
messages, fallback and budget warnings (`nbagent.events` re-exports them and lists
them in its `__all__`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._event_types import BudgetLimit, CompactionReason, Event
from ._messages import Message


@dataclass(frozen=True, kw_only=True)
class CompactionStarted(Event):
    """The conversation is being shrunk.

    Attributes:
        reason: "overflow" (the provider said the prompt is too long) or "proactive" (the
            estimate passed `compaction_threshold` of the context window before sending).
        tokens_before: The estimated size of the conversation, in tokens.
        strategy: The compaction strategy's name.
    """

    reason: CompactionReason
    tokens_before: int
    strategy: str


@dataclass(frozen=True, kw_only=True)
class CompactionFinished(Event):
    """A compaction ended: tokens before and after, and whether it worked (`ok`).

    Attributes:
        tokens_before: The estimated size before, in tokens.
        tokens_after: The estimated size after, in tokens.
        strategy: The compaction strategy's name.
        removed: How many blocks (stubbed tool outputs) or messages (summarised) were replaced.
        ok: Whether the conversation got smaller; when not, the overflow is final.
        message: What happened, when there is more to say, or "".
    """

    tokens_before: int
    tokens_after: int
    strategy: str
    removed: int
    ok: bool
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(Event):
    """A tool call is about to run, with its decoded arguments.

    Attributes:
        call_id: The provider's id of the call (its result carries the same id).
        name: The tool's name.
        arguments: The decoded arguments (empty when they were not JSON).
        source: The tool source it belongs to (an MCP server's name), "" for a local tool.
    """

    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallFinished(Event):
    """A tool call ended; its result (an error result too) goes back to the model.

    Attributes:
        call_id: The provider's id of the call.
        name: The tool's name.
        is_error: Whether the result is an error result.
        content: The result's text, as the model reads it.
        duration_s: How long the call took, in seconds.
        error: Why it failed ("unknown_tool", "invalid_arguments", "raised", "timeout", ...;
            tool sources add their own), "" when it did not.
        source: The tool source it belongs to, "" for a local tool.
    """

    call_id: str
    name: str
    is_error: bool
    content: str
    duration_s: float
    error: str = ""
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolSourceUnavailable(Event):
    """A tool source (an MCP server, say) offers no tools this run; the model cannot call them.

    Attributes:
        source: The source's name.
        reason: Why it is unavailable (the server's start-up error, say).
    """

    source: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class MessageCommitted(Event):
    """A message joined the history: the only event that changes the conversation.

    Attributes:
        message: The message.
        index: Its position in `agent.transcript` (the whole conversation, never compacted).
    """

    message: Message
    index: int


@dataclass(frozen=True, kw_only=True)
class FallbackStarted(Event):
    """A model of the chain failed for good; the next one takes over.

    Attributes:
        from_model: The model that failed.
        to_model: The model that takes over.
        error: The error class name that ended it.
        message: The error's message.
    """

    from_model: str
    to_model: str
    error: str
    message: str


@dataclass(frozen=True, kw_only=True)
class BudgetWarning(Event):
    """A budget is close to its limit; the run goes on.

    Today the one warning is about turns: when `Budget.max_turns_warning` turns are left, the
    model is told to wrap up, and this event carries the note it was sent.

    Attributes:
        limit: The `Budget` field it is about ("max_turns").
        actual: What the run has used, in the limit's unit (turns so far).
        limit_value: The limit.
        message: The note sent to the model ("[nbagent] 2 turns left in this run's budget: ...").
    """

    limit: BudgetLimit
    actual: float
    limit_value: float
    message: str
