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

import dataclasses
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._core._messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..errors import ContextOverflow, EmptyResponse, ProviderError
from ..providers._base import ToolSpec

__all__ = [
    "CompactionContext",
    "CompactionResult",
    "Compactor",
    "DefaultCompaction",
    "StubOldToolOutput",
    "Summarize",
    "TokenEstimator",
    "estimate_tokens",
    "render_transcript",
    "stub_text",
]

IMAGE_TOKENS = 1000
CHARS_PER_TOKEN = 4
STUB_SUFFIX = "removed to fit the context window]"
SUMMARY_MARKER = "[Summary of the earlier conversation"
SUMMARY_ACK = (
    "Understood. I have the summary of our earlier conversation and will continue from it."
)

Summarizer = Callable[[Sequence[Message], str], Awaitable[str]]


# -- estimating ---------------------------------------------------------------------------------


def _block_chars(block: Any) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ImageBlock):
        return IMAGE_TOKENS * CHARS_PER_TOKEN
    if isinstance(block, ToolUseBlock):
        return len(block.name) + len(block.raw_input or json.dumps(block.input))
    if isinstance(block, ToolResultBlock):
        return sum(_block_chars(p) for p in block.content) + 8
    return len(getattr(block, "thinking", ""))


def estimate_tokens(
    messages: Sequence[Message], system: str | None = None, tools: Sequence[ToolSpec] = ()
) -> int:
    """A fast estimate (about four characters a token), good enough to decide when to compact."""
    chars = len(system or "")
    for m in messages:
        chars += 4 + sum(_block_chars(b) for b in m.blocks)
    for t in tools:
        chars += len(t.name) + len(t.description) + len(json.dumps(t.input_schema))
    return chars // CHARS_PER_TOKEN + 1


class TokenEstimator:
    """`estimate_tokens`, scaled by a ratio learned from what the provider reports.

    `observe(estimated, reported)` takes the raw heuristic estimate of a request that went
    through and the input tokens the provider counted for it; the ratio moves towards
    reported/estimated (an exponential average, clamped to `min_ratio`..`max_ratio`). Samples
    from tiny requests, and implausible ones (a provider that leaves cached tokens out of
    `input_tokens`, a test double that always says 10), are ignored.
    """

    def __init__(
        self,
        *,
        ratio: float = 1.0,
        smoothing: float = 0.5,
        min_ratio: float = 0.75,
        max_ratio: float = 4.0,
        min_sample: int = 100,
    ) -> None:
        self.min_ratio = min_ratio
        self.max_ratio = max(min_ratio, max_ratio)
        self.smoothing = min(1.0, max(0.0, smoothing))
        self.min_sample = max(1, min_sample)
        self.ratio = self._clamp(ratio)
        self.samples = 0

    def __repr__(self) -> str:
        return f"TokenEstimator(ratio={self.ratio:.3f}, samples={self.samples})"

    def _clamp(self, ratio: float) -> float:
        return min(self.max_ratio, max(self.min_ratio, ratio))

    def raw(
        self, messages: Sequence[Message], system: str | None = None, tools: Sequence[ToolSpec] = ()
    ) -> int:
        return estimate_tokens(messages, system, tools)

    def estimate(
        self, messages: Sequence[Message], system: str | None = None, tools: Sequence[ToolSpec] = ()
    ) -> int:
        return math.ceil(self.raw(messages, system, tools) * self.ratio)

    __call__ = estimate

    def observe(self, estimated: int, reported: int | None) -> bool:
        """Learn from one request: `estimated` is its raw heuristic estimate. True if used."""
        if not reported or reported <= 0 or estimated < self.min_sample:
            return False
        sample = reported / estimated
        if not 0.25 <= sample <= 8.0:
            return False
        sample = self._clamp(sample)
        if self.samples == 0:
            self.ratio = sample
        else:
            self.ratio = self._clamp(self.ratio + self.smoothing * (sample - self.ratio))
        self.samples += 1
        return True


# -- the protocol -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionContext:
    reason: str  # "overflow" | "proactive"
    round: int  # 1 for the first compaction of this step, 2 for the next…
    error: ContextOverflow | None = None
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CompactionResult:
    messages: list[Message]
    tokens_before: int
    tokens_after: int
    strategy: str  # which strategy did the work: "stub", "summarize", "stub+summarize"
    removed: int  # how many blocks (stubs) or messages (summaries) were replaced
    note: str = ""  # anything the user should know, e.g. a summary that failed


@runtime_checkable
class Compactor(Protocol):
    name: str

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None: ...


class _Estimating:
    """Shared by the built-in strategies: a calibrated estimator the agent can feed."""

    estimator: TokenEstimator

    def estimate(
        self, messages: Sequence[Message], system: str | None = None, tools: Sequence[ToolSpec] = ()
    ) -> int:
        return self.estimator.estimate(messages, system, tools)

    def observe(self, estimated: int, reported: int | None) -> bool:
        return self.estimator.observe(estimated, reported)

    def _est(self, messages: Sequence[Message], ctx: CompactionContext) -> int:
        return self.estimator.estimate(messages, ctx.system, ctx.tools)


def target_estimate(
    messages: Sequence[Message],
    ctx: CompactionContext,
    estimate: Callable[[Sequence[Message]], int],
    ratio: float = 0.7,
) -> float | None:
    """How many estimated tokens the compacted conversation may hold, or None if unknown.

    `ratio` × the provider's reported `limit` (else `ctx.extra["target_tokens"]`, the window).
    When the provider also said how many tokens it counted for these very messages, the target
    is put on the scale of our estimate: the share to keep is limit·ratio / tokens.
    """
    given = ctx.extra.get("target_estimate")
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        return float(given)
    err = ctx.error
    if err is not None and err.limit:
        if err.tokens:
            counted = max(err.tokens, err.limit + 1)
            return ratio * err.limit * estimate(messages) / counted
        return ratio * err.limit
    target = ctx.extra.get("target_tokens")
    if isinstance(target, (int, float)) and not isinstance(target, bool) and target > 0:
        return ratio * target
    return None


# -- strategy 1: stubs ---------------------------------------------------------------------------


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
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
        self.keep_last = max(0, keep_last)
        self.ratio = ratio
        self.min_chars = max(0, min_chars)
        self.estimator = estimator or TokenEstimator()
        self.keep: int | None = None  # the remembered cutoff: newest messages kept whole

    def __repr__(self) -> str:
        return f"StubOldToolOutput(keep_last={self.keep_last}, remembered_keep={self.keep})"

    def reset(self) -> None:
        self.keep = None

    def _candidates(self, messages: Sequence[Message]) -> list[int]:
        return [
            i
            for i, m in enumerate(messages)
            if any(_stubbable(b, self.min_chars) for b in m.blocks)
        ]

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        out = list(messages)
        n = len(out)
        candidates = self._candidates(out)
        if not candidates:
            return None
        before = self._est(out, ctx)
        target = target_estimate(out, ctx, lambda ms: self._est(ms, ctx), self.ratio)
        protect = max(0, self.keep_last - max(0, ctx.round - 1))
        outside = [i for i in candidates if i < n - protect]
        fits_window = target is not None and before <= target / self.ratio
        if not outside and ctx.reason == "proactive" and fits_window:
            return None  # only the fresh output could go, and the whole still fits the window
        names = _tool_names(out)
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
        self._remember(max(self.keep_last, n - cutoff))
        return CompactionResult(out, before, self._est(out, ctx), self.name, removed)

    def _remember(self, keep: int) -> None:
        self.keep = keep if self.keep is None else min(self.keep, keep)

    async def prepare(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Stub what lies before the remembered cutoff; None when nothing changes."""
        if self.keep is None:
            return None
        out = list(messages)
        names = _tool_names(out)
        removed = 0
        for i in range(max(0, len(out) - self.keep)):
            out[i], k = _stub_message(out[i], names, self.min_chars)
            removed += k
        if not removed:
            return None
        before = self._est(messages, ctx)
        note = f"remembered cutoff: tool output older than the newest {self.keep} messages"
        return CompactionResult(out, before, self._est(out, ctx), self.name, removed, note)


# -- strategy 2: summary -------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = max(0, limit * 2 // 3)
    tail = max(0, limit - head)
    omitted = len(text) - head - tail
    return f"{text[:head]} [… {omitted:,} chars omitted …] {text[len(text) - tail :]}"


def render_transcript(
    messages: Sequence[Message], *, max_block_chars: int = 2000, max_chars: int | None = None
) -> str:
    """The conversation as plain text, for a summary request.

    Plain text needs no tool definitions and cannot break tool pairing or role order, and each
    block is clipped so the request stays far smaller than what it replaces.
    """
    names = _tool_names(messages)
    limit = max(100, max_block_chars)
    while True:
        lines: list[str] = []
        for m in messages:
            who = "User" if m.role == "user" else "Assistant"
            for b in m.blocks:
                if isinstance(b, TextBlock) and b.text.strip():
                    lines.append(f"{who}: {_clip(b.text, limit)}")
                elif isinstance(b, ImageBlock):
                    lines.append(f"{who}: [an image]")
                elif isinstance(b, ToolUseBlock):
                    args = b.raw_input if b.raw_input is not None else json.dumps(b.input)
                    lines.append(f"Assistant called the tool {b.name}({_clip(args, limit // 2)})")
                elif isinstance(b, ToolResultBlock):
                    label = "error from" if b.is_error else "result of"
                    name = names.get(b.tool_use_id, "a tool")
                    lines.append(f"Tool {label} {name}: {_clip(b.text, limit)}")
                elif isinstance(b, ThinkingBlock):
                    continue
        text = "\n".join(lines)
        if max_chars is None or len(text) <= max_chars:
            return text
        if limit <= 200:
            return _clip(text, max_chars)
        limit //= 2


DEFAULT_INSTRUCTION = (
    "The conversation so far is too long for the model's context window. Summarise it so the "
    "summary can replace it: what the user asked for and why, decisions made, facts learned "
    "(file names, numbers, results of tool calls, errors), and what remains to be done. Write "
    "plain prose, at most {words} words. Reply with the summary only.\n\n"
    "<conversation>\n{transcript}\n</conversation>"
)


def _cut_points(messages: Sequence[Message]) -> list[int]:
    """Indices b where messages[b:] can stand on its own after a summary.

    messages[b] is a user message with no tool results (so no tool_use of messages[:b] loses
    its result), b >= 1, and messages[:b] is more than an earlier summary.
    """
    points: list[int] = []
    for b in range(1, len(messages)):
        m = messages[b]
        if m.role != "user" or m.tool_results:
            continue
        if b <= 2 and messages[0].text.startswith(SUMMARY_MARKER):
            continue
        points.append(b)
    return points


class Summarize(_Estimating):
    """Ask the model for a summary of the oldest turns; one user message holds it.

    The cut is made where the kept part starts with a user message that holds no tool results,
    so no tool call loses its result, and the newest message is always kept. The summarised
    turns become `[summary user message, short assistant acknowledgement]`, which keeps the
    conversation starting with a user message and alternating roles. The cut keeps as much of
    the recent conversation as fits the target; on a further overflow it keeps only the
    newest turn.

    The summary request goes through the agent's retry policy and is logged as a `compaction`
    attempt (`ctx.extra["summarize"]`, the agent's `_summarize`). When it fails, or no cut is
    possible, `fallback_to_stubs=True` falls back to `StubOldToolOutput`.
    """

    name = "summarize"

    def __init__(
        self,
        *,
        ratio: float = 0.7,
        summary_words: int = 400,
        instruction: str = DEFAULT_INSTRUCTION,
        fallback_to_stubs: bool = True,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self.ratio = ratio
        self.summary_words = max(20, summary_words)
        self.instruction = instruction
        self.estimator = estimator or TokenEstimator()
        self.stubs: StubOldToolOutput | None = (
            StubOldToolOutput(ratio=ratio, estimator=self.estimator) if fallback_to_stubs else None
        )

    def __repr__(self) -> str:
        return f"Summarize(summary_words={self.summary_words})"

    async def prepare(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        return None if self.stubs is None else await self.stubs.prepare(messages, ctx)

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        try:
            result = await self.attempt(messages, ctx)
        except ProviderError as exc:
            if self.stubs is None:
                return None
            stubbed = await self.stubs.compact(messages, ctx)
            if stubbed is None:
                return None
            note = f"the summary failed ({type(exc).__name__}: {exc}); stubbed tool output instead"
            return dataclasses.replace(stubbed, note=note)
        if result is None and self.stubs is not None:
            return await self.stubs.compact(messages, ctx)
        return result

    def choose_cut(self, messages: Sequence[Message], ctx: CompactionContext) -> int | None:
        """Where to cut: the kept part is messages[cut:]. None when no cut is possible."""
        points = _cut_points(messages)
        if not points:
            return None
        if ctx.round > 1:
            return points[-1]
        summary_tokens = self.summary_words * 2
        target = target_estimate(messages, ctx, lambda ms: self._est(ms, ctx), self.ratio)
        if target is None:
            target = self._est(messages, ctx) / 2
        for b in points:
            if self._est(messages[b:], ctx) + summary_tokens <= target:
                return b
        return points[-1]

    async def attempt(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Summarise once. None when there is nothing to summarise or it would not help;
        raises the summary request's final error."""
        summarize: Summarizer | None = ctx.extra.get("summarize")
        if summarize is None:
            return None
        cut = self.choose_cut(messages, ctx)
        if cut is None:
            return None
        old, kept = messages[:cut], messages[cut:]
        target = target_estimate(messages, ctx, lambda ms: self._est(ms, ctx), self.ratio)
        budget = None if target is None else max(2000, int(target * 2))
        transcript = render_transcript(old, max_chars=budget)
        instruction = self.instruction.format(words=self.summary_words, transcript=transcript)
        summary = (await summarize([], instruction)).strip()
        if not summary:
            raise EmptyResponse("the model returned an empty summary", code="empty_summary")
        head = Message.user(
            f"{SUMMARY_MARKER} ({len(old)} messages), written to fit the context window]\n\n"
            f"{summary}"
        )
        out = [head, Message.assistant(SUMMARY_ACK), *kept]
        before = self._est(messages, ctx)
        after = self._est(out, ctx)
        if after >= before:
            return None
        return CompactionResult(out, before, after, self.name, len(old))


# -- the default ---------------------------------------------------------------------------------


class DefaultCompaction(_Estimating):
    """Stubs first; a summary when stubs cannot get below the target; stubs alone if the
    summary fails. What `Agent` uses when `compaction=None`.

    One `TokenEstimator` is shared by both strategies and calibrated by the agent from the
    provider's reported input tokens.
    """

    name = "default"

    def __init__(
        self,
        *,
        keep_last: int = 1,
        ratio: float = 0.7,
        summarize: bool = True,
        summary_words: int = 400,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self.ratio = ratio
        self.estimator = estimator or TokenEstimator()
        self.stub = StubOldToolOutput(keep_last, ratio=ratio, estimator=self.estimator)
        self.summarizer: Summarize | None = (
            Summarize(
                ratio=ratio,
                summary_words=summary_words,
                fallback_to_stubs=False,
                estimator=self.estimator,
            )
            if summarize
            else None
        )

    def __repr__(self) -> str:
        return f"DefaultCompaction(stub={self.stub!r}, summarize={self.summarizer is not None})"

    def reset(self) -> None:
        self.stub.reset()

    async def prepare(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        return await self.stub.prepare(messages, ctx)

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        before = self._est(messages, ctx)
        target = target_estimate(messages, ctx, lambda ms: self._est(ms, ctx), self.ratio)
        ctx = dataclasses.replace(ctx, extra={**ctx.extra, "target_estimate": target})
        stubbed = await self.stub.compact(messages, ctx)
        if stubbed is not None and (target is None or stubbed.tokens_after <= target):
            return stubbed
        if self.summarizer is None:
            return stubbed
        base = stubbed.messages if stubbed is not None else messages
        try:
            summed = await self.summarizer.attempt(base, ctx)
        except ProviderError as exc:
            if stubbed is None:
                return None
            note = f"the summary failed ({type(exc).__name__}: {exc}); kept the stubs"
            return dataclasses.replace(stubbed, note=note)
        if summed is None:
            return stubbed
        if stubbed is None:
            return dataclasses.replace(summed, tokens_before=before)
        return CompactionResult(
            summed.messages,
            before,
            summed.tokens_after,
            "stub+summarize",
            stubbed.removed + summed.removed,
        )
