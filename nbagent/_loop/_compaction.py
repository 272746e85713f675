"""Compaction: rewriting a conversation that no longer fits the model's context window.

A strategy (a `Compactor`) takes the messages about to be sent and returns a shorter list, or
None when it cannot shed anything; the agent then fails hard with the provider's
`ContextOverflow`. The agent calls it in two situations:

- reactively, after the provider answered `ContextOverflow` (`ctx.reason == "overflow"`,
  `ctx.error` carries the provider's `tokens`/`limit` when it said them); each further overflow
  in the same step comes with a higher `ctx.round`, and the strategy sheds more;
- proactively, before sending, when the estimated prompt passes a share of the model's window
  (`ctx.reason == "proactive"`, `ctx.extra["target_tokens"]` is the window).

Two optional methods let a strategy do more than that:

- `prepare(messages, ctx)` is called before every request and applies what the strategy has
  learned (the remembered cutoff of `StubOldToolOutput`), so later turns send the stubs up front
  instead of overflowing again;
- `estimate(messages, system, tools)` and `observe(estimated, reported)` give the agent a
  token estimate calibrated against the input tokens the provider reports (`TokenEstimator`).

Invariants every built-in strategy keeps: every tool_use keeps its tool_result (a stub replaces
the output, never the pairing, because providers reject an unanswered tool call); the rewritten
conversation starts with a user message and alternates roles; the newest message is never
dropped. The agent keeps the untouched conversation in `agent.transcript`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._core._messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
)
from .._core._numbers import is_number, is_positive
from ..errors import ContextOverflow
from ..events import CompactionReason
from ..providers._base import ToolSpec
from ._estimate import TokenEstimator

STUB_SUFFIX = "removed to fit the context window]"

Summarizer = Callable[[Sequence[Message], str], Awaitable[str]]
"""How a strategy asks the model for a summary: `await summarize(messages, instruction)`
gives the text, through the agent's retry policy (`CompactionContext.extra["summarize"]`)."""


# -- the protocol -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionContext:
    """What a compaction strategy is told about the request it must make fit.

    Attributes:
        reason: "overflow" (the provider refused the prompt) or "proactive" (the estimate
            passed the agent's `compaction_threshold` before sending).
        round: 1 for the first compaction of this step, 2 for the next: a strategy may cut
            deeper each round.
        error: The provider's `ContextOverflow`, with its `tokens` and `limit` when it said
            them; None for a proactive compaction.
        system: The system prompt (it counts against the window too).
        tools: The tools sent with the request (their schemas count too).
        extra: What the agent adds: "target_tokens" (the context window, when known) and
            "summarize" (a `Summarizer` that asks the model for a summary).
    """

    reason: CompactionReason
    round: int  # 1 for the first compaction of this step, 2 for the next…
    error: ContextOverflow | None = None
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did, for the widget, the events and the attempt log.

    Attributes:
        messages: The new conversation, sent in place of the old.
        tokens_before: The estimated size before, in tokens.
        tokens_after: The estimated size after, in tokens.
        strategy: Which strategy did the work ("stub", "summarize", "stub+summarize").
        removed: How many blocks (stubs) or messages (summaries) were replaced.
        note: Anything the user should know (a summary that failed), or "".
    """

    messages: list[Message]
    tokens_before: int
    tokens_after: int
    strategy: str  # which strategy did the work: "stub", "summarize", "stub+summarize"
    removed: int  # how many blocks (stubs) or messages (summaries) were replaced
    note: str = ""  # anything the user should know, e.g. a summary that failed


@runtime_checkable
class Compactor(Protocol):
    """A compaction strategy: shrink the conversation to fit, or say it cannot.

    Pass your own as `Agent(compaction=...)`: any object with a `name` and `compact`. A
    strategy may also have `prepare(messages, ctx)` (applied before every request, to keep
    what an earlier compaction learned) and `reset()`.

    Attributes:
        name: The strategy's name, shown in events and the attempt log.
    """

    name: str

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Shrink `messages` so the request fits.

        Args:
            messages: The conversation that did not fit (or would not, by the estimate).
            ctx: Why it runs, which round, the provider's error and what else counts.

        Returns:
            The result, or None when it cannot make the conversation smaller (the overflow
            is then final).
        """
        ...


class _Estimating:
    """Shared by the built-in strategies: a calibrated estimator the agent can feed, and the
    target (`ratio` of the limit) they compact towards."""

    def __init__(self, ratio: float, estimator: TokenEstimator | None) -> None:
        self.ratio = ratio
        self.estimator = estimator or TokenEstimator()

    def estimate(
        self, messages: Sequence[Message], system: str | None = None, tools: Sequence[ToolSpec] = ()
    ) -> int:
        return self.estimator.estimate(messages, system, tools)

    def observe(self, estimated: int, reported: int | None) -> bool:
        return self.estimator.observe(estimated, reported)

    def _est(self, messages: Sequence[Message], ctx: CompactionContext) -> int:
        return self.estimator.estimate(messages, ctx.system, ctx.tools)

    def _target(self, messages: Sequence[Message], ctx: CompactionContext) -> float | None:
        """How many estimated tokens the compacted conversation may hold, or None if unknown.

        `ratio` × the provider's reported `limit` (else `ctx.extra["target_tokens"]`, the
        window). When the provider also said how many tokens it counted for these very
        messages, the target is put on the scale of our estimate: the share to keep is
        limit·ratio / tokens.
        """
        given = ctx.extra.get("target_estimate")
        if is_number(given):
            return float(given)
        err, ratio = ctx.error, self.ratio
        if err is not None and err.limit:
            if err.tokens:
                counted = max(err.tokens, err.limit + 1)
                return ratio * err.limit * self._est(messages, ctx) / counted
            return ratio * err.limit
        target = ctx.extra.get("target_tokens")
        if is_positive(target):
            return ratio * target
        return None


# -- strategy 1: stubs ---------------------------------------------------------------------------


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    return {u.id: u.name for m in messages for u in m.tool_uses}


def stub_text(name: str, chars: int, images: int = 0) -> str:
    what = f"{chars:,} chars"
    if images:
        what += f" and {images} image" + ("s" if images > 1 else "")
    return f"[tool output of {name}, {what}, {STUB_SUFFIX}"


def _is_stub(block: ToolResultBlock) -> bool:
    t = block.text
    return t.startswith("[tool output of ") and t.endswith(STUB_SUFFIX)


def _stubbable(block: Block, min_chars: int) -> bool:
    if isinstance(block, ImageBlock):
        return True
    if isinstance(block, ToolResultBlock) and not _is_stub(block):
        if any(isinstance(p, ImageBlock) for p in block.content):
            return True
        return len(block.text) > min_chars
    return False


def _stub_message(m: Message, names: dict[str, str], min_chars: int) -> tuple[Message, int]:
    """`m` with its tool outputs and images replaced by stubs, and how many were replaced."""
    blocks: list[Block] = []
    removed = 0
    for b in m.blocks:
        if not _stubbable(b, min_chars):
            blocks.append(b)
        elif isinstance(b, ToolResultBlock):
            chars = sum(len(p.text) for p in b.content if isinstance(p, TextBlock))
            images = sum(1 for p in b.content if isinstance(p, ImageBlock))
            text = stub_text(names.get(b.tool_use_id, "a tool"), chars, images)
            blocks.append(ToolResultBlock(b.tool_use_id, (TextBlock(text),), b.is_error))
            removed += 1
        else:
            blocks.append(TextBlock(f"[image {STUB_SUFFIX}"))
            removed += 1
    return (Message(m.role, tuple(blocks)) if removed else m), removed


class StubOldToolOutput(_Estimating):
    """Replace tool results and images older than a cutoff with short stubs.

    "[tool output of read_file, 12,431 chars, removed to fit the context window]": the model
    still sees that it called the tool and how much came back, and every tool_use keeps its
    result. Outputs are stubbed oldest first until the estimate is below the target (`ratio` of
    the provider's limit or of the window; without one, everything before the newest
    `keep_last` messages). The newest `keep_last` messages (the output the model has not seen
    yet) are only touched when nothing else can be shed (and, before sending, only when the
    estimate passes the window itself), or on a further overflow in the same step. Outputs of
    at most `min_chars` characters are left alone: a stub would not be shorter.

    The cutoff is remembered, as a number of newest messages kept whole: `prepare()` applies it
    to every later request, so a long session does not overflow again turn after turn.
    `reset()` forgets it.

    Args:
        keep_last: How many newest messages to keep whole when it can.
        ratio: The target, as a share of the provider's limit or the window (0.7: stub until
            the estimate is at most 70% of it).
        min_chars: Outputs of at most this many characters are left alone.
        estimator: The token estimator; None for a fresh one (the agent calibrates it).

    Attributes:
        name: "stub".
        keep_last: How many newest messages it keeps whole when it can.
        ratio: The target share of the limit.
        min_chars: The size below which outputs are left alone.
        estimator: The token estimator.
        keep: The remembered cutoff (newest messages kept whole), or None.
    """

    name = "stub"

    def __init__(
        self,
        keep_last: int = 1,
        *,
        ratio: float = 0.7,
        min_chars: int = 200,
        estimator: TokenEstimator | None = None,
    ) -> None:
        super().__init__(ratio, estimator)
        self.keep_last = max(0, keep_last)
        self.min_chars = max(0, min_chars)
        self.keep: int | None = None  # the remembered cutoff: newest messages kept whole

    def __repr__(self) -> str:
        return f"StubOldToolOutput(keep_last={self.keep_last}, remembered_keep={self.keep})"

    def reset(self) -> None:
        """Forget the remembered cutoff."""
        self.keep = None

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Stub outputs, oldest first, until the estimate is below the target.

        Args:
            messages: The conversation that does not fit.
            ctx: Why it runs, which round, the provider's error, the system prompt and tools
                that count against the window.

        Returns:
            The result, or None when there is nothing to stub (or, before sending, when only
            the newest output could go and the whole still fits the window).
        """
        out = list(messages)
        n = len(out)
        candidates = [
            i for i, m in enumerate(out) if any(_stubbable(b, self.min_chars) for b in m.blocks)
        ]
        if not candidates:
            return None
        before = self._est(out, ctx)
        target = self._target(out, ctx)
        protect = max(0, self.keep_last - max(0, ctx.round - 1))
        outside = [i for i in candidates if i < n - protect]
        fits_window = target is not None and before <= target / self.ratio
        if not outside and ctx.reason == "proactive" and fits_window:
            return None  # only the fresh output could go, and the whole still fits the window
        names = tool_names(out)
        removed = 0
        cutoff = 0
        for i in outside or candidates:
            out[i], k = _stub_message(out[i], names, self.min_chars)
            removed += k
            cutoff = i + 1
            if target is not None and self._est(out, ctx) <= target:
                break
        if not removed:
            return None
        keep = max(self.keep_last, n - cutoff)  # remembered; a later cutoff only keeps fewer
        self.keep = keep if self.keep is None else min(self.keep, keep)
        return CompactionResult(out, before, self._est(out, ctx), self.name, removed)

    async def prepare(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Stub what lies before the remembered cutoff (before every request).

        Args:
            messages: The conversation that is about to be sent (it is not changed).
            ctx: Why it runs, which round, the provider's error, the system prompt and tools
                that count against the window.

        Returns:
            The result, or None when nothing changes.
        """
        if self.keep is None:
            return None
        out = list(messages)
        names = tool_names(out)
        removed = 0
        for i in range(max(0, len(out) - self.keep)):
            out[i], k = _stub_message(out[i], names, self.min_chars)
            removed += k
        if not removed:
            return None
        before = self._est(messages, ctx)
        note = f"remembered cutoff: tool output older than the newest {self.keep} messages"
        return CompactionResult(out, before, self._est(out, ctx), self.name, removed, note)
