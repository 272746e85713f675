"""The error tree's root, the four actions, and the errors that are not a provider's."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..recording import RecordingError as _RecordingError
from ..recording import set_error_type as _set_recording_error_type


class Action(str, enum.Enum):
    """What the agent does about a failure: the four actions, as `classify` returns them.

    The values are what the attempt log's `action` column holds (with "none" for a success and
    "fallback" for moving to the next model of a chain).

    Attributes:
        RETRY: Send the same request again after a wait (backoff, or the server's Retry-After).
        COMPACT: Shrink the conversation with the agent's compaction strategy, then retry once.
        TOOL_RESULT: A tool call failed: the model gets an error result to read and goes on.
        FAIL: Stop the run with the typed error; `agent.history` is as before the failed step.
        REASK: A structured answer broke its schema: the errors go back to the model, which
            answers again. It is the third action's other form: where `TOOL_RESULT` hands a
            failed tool call back to the model, `REASK` hands back a structured answer.
    """

    RETRY = "retry"
    COMPACT = "compact"
    TOOL_RESULT = "tool_result"
    REASK = "reask"
    FAIL = "fail"


class NbAgentError(Exception):
    """Base of every error nbagent raises on purpose."""


class ConfigError(NbAgentError):
    """Something the user configured cannot work; nothing was sent."""


class RecordingFileError(ConfigError, _RecordingError):
    """A recording (`nbagent.recording`) that cannot be read or written: missing, damaged, not
    a recording, or from a newer nbagent. It is the `RecordingError` of that module too."""


_set_recording_error_type(RecordingFileError)  # the recording module raises it from now on


class SessionFileError(NbAgentError):
    """A session file cannot be loaded; the message names the file and the problem.

    Args:
        path: The session file (any path-like; kept as a string).
        problem: What is wrong with it, as a phrase ("not JSON", "version 3 is newer ...").

    Attributes:
        path: The session file, as a string.
        problem: What is wrong with it.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"cannot load session file {self.path}: {problem}")


class ToolPairingError(NbAgentError):
    """A history holds a tool_use with no matching tool_result."""


class HostError(NbAgentError):
    """Code around the agent (an event handler, the widget, a session save) raised."""


class Aborted(NbAgentError):
    """The run was cancelled. Never retried."""


class ScriptExhausted(NbAgentError):
    """A ScriptedModel ran out of scripted replies."""


class LengthResumeExhausted(NbAgentError):
    """The model kept stopping at max_tokens without producing anything."""


class BudgetExceeded(NbAgentError):
    """A budget (cost, tokens, wall clock, turns) was passed; checked after each turn.

    A budget is a soft cap: the turn that passes it finishes, and this is raised before the
    next one starts, so `actual` may be a little over `limit_value`.

    Args:
        limit: Which `Budget` field was passed: "max_cost_usd", "max_total_tokens",
            "max_wall_s" or "max_turns".
        actual: What the run has used of it (US dollars, tokens, seconds or turns).
        limit_value: The limit that was set, in the same unit.

    Attributes:
        limit: Which `Budget` field was passed.
        actual: What the run used, in the limit's unit.
        limit_value: The limit that was set.
    """

    def __init__(self, limit: str, actual: float, limit_value: float) -> None:
        self.limit = limit
        self.actual = actual
        self.limit_value = limit_value
        super().__init__(f"budget exceeded: {limit} is {actual:g}, the limit is {limit_value:g}")


@dataclass(frozen=True)
class OutputIssue:
    """One thing wrong with a structured answer: where, and what.

    Attributes:
        path: Where, dotted ("items.2.price"); "" for the whole answer.
        message: What is wrong, in a sentence the model can act on.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class OutputInvalid(NbAgentError):
    """A structured answer (`output=`) that is not JSON, breaks the schema, or that a validator
    refused. Reasked while `output_retries` allows; past it, final.

    Args:
        errors: What is wrong, one `OutputIssue` per problem.
        raw: The answer's text as the model wrote it.
        usage: The tokens and cost of the attempt that produced it, when known.
        reasks: How many reasks came before this answer.
        answer: The assistant message that held the answer, when there was one.

    Attributes:
        errors: What is wrong, one `OutputIssue` per problem (field path and message).
        raw: The answer's text as the model wrote it (the output tool's arguments in tool mode).
        usage: The tokens and cost of the attempt that produced the answer, when known.
        reasks: How many reasks came before this answer (on the final error).
        answer: The assistant message that held the answer, when there was one.
    """

    def __init__(
        self,
        errors: Iterable[OutputIssue],
        raw: str = "",
        *,
        usage: Any = None,
        reasks: int = 0,
        answer: Any = None,
    ) -> None:
        self.errors: tuple[OutputIssue, ...] = tuple(errors) or (
            OutputIssue("", "the answer does not match the schema"),
        )
        self.raw = raw
        self.usage = usage
        self.reasks = reasks
        self.answer = answer  # the assistant Message that held the answer, when there was one
        super().__init__(self._text())

    @property
    def first(self) -> str:
        """The first error as "path: message", with how many more there are."""
        more = len(self.errors) - 1
        return str(self.errors[0]) + (f" (and {more} more)" if more > 0 else "")

    def _text(self) -> str:
        n = len(self.errors)
        head = "the structured answer does not match the schema"
        if self.reasks:
            head += f" after {self.reasks} reask{'s' if self.reasks != 1 else ''}"
        listed = "; ".join(str(e) for e in self.errors[:5])
        extra = f"; and {n - 5} more" if n > 5 else ""
        return f"{head} ({n} error{'s' if n != 1 else ''}): {listed}{extra}"

    def with_reasks(self, reasks: int) -> OutputInvalid:
        """The same failure, saying how many reasks came before it (the final error's text).

        Args:
            reasks: How many reasks came before this answer.

        Returns:
            A new `OutputInvalid` with every field kept.
        """
        return OutputInvalid(
            self.errors, self.raw, usage=self.usage, reasks=reasks, answer=self.answer
        )


class OutputTruncated(NbAgentError):
    """A structured answer cut off at `max_tokens` (the provider's `length` / `MAX_TOKENS`).

    Never reasked: the model did not disobey, it ran out of room; asking again would be cut
    at the same place. Raise `max_tokens` (or ask for less).

    Args:
        limit: The `max_tokens` the request carried.
        output_tokens: The tokens the answer used, or None when the provider did not say.
        raw: The partial answer's text.
        usage: The tokens and cost of that attempt, when known.

    Attributes:
        limit: The `max_tokens` the request carried.
        output_tokens: The tokens the answer used, as the provider counted them (None when it
            did not say).
        raw: The partial answer's text.
        usage: The tokens and cost of that attempt, when known.
    """

    def __init__(
        self,
        limit: int,
        output_tokens: int | None = None,
        raw: str = "",
        *,
        usage: Any = None,
    ) -> None:
        self.limit = limit
        self.output_tokens = output_tokens
        self.raw = raw
        self.usage = usage
        used = f"used {output_tokens:,} tokens" if output_tokens is not None else "was cut off"
        super().__init__(
            f"the structured answer was cut off at max_tokens={limit:,} (the answer {used}) "
            "before its JSON was complete; raise max_tokens (Agent(max_tokens=...)) or ask for "
            "a shorter answer"
        )
