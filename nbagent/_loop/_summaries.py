"""Compaction by summary: the oldest turns become one summary the model writes itself, and the
default strategy that combines stubs and summaries."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from .._core._messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..errors import EmptyResponse, ProviderError
from ._compaction import (
    CompactionContext,
    CompactionResult,
    StubOldToolOutput,
    Summarizer,
    _Estimating,
    tool_names,
)
from ._estimate import TokenEstimator

SUMMARY_MARKER = "[Summary of the earlier conversation"
SUMMARY_ACK = (
    "Understood. I have the summary of our earlier conversation and will continue from it."
)


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
    names = tool_names(messages)
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
                # (thinking is left out: the summary is of what was said and done)
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

    Args:
        ratio: The target, as a share of the provider's limit or the window.
        summary_words: How long the summary may be, in words (at least 20).
        instruction: What the model is asked; `{words}` and `{transcript}` are filled in.
        fallback_to_stubs: Whether to stub old tool output when the summary fails or no cut
            is possible.
        estimator: The token estimator; None for a fresh one.

    Attributes:
        name: "summarize".
        ratio: The target share of the limit.
        summary_words: How long the summary may be, in words.
        instruction: What the model is asked.
        estimator: The token estimator.
        stubs: The fallback strategy, or None.
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
        super().__init__(ratio, estimator)
        self.summary_words = max(20, summary_words)
        self.instruction = instruction
        self.stubs: StubOldToolOutput | None = (
            StubOldToolOutput(ratio=ratio, estimator=self.estimator) if fallback_to_stubs else None
        )

    def __repr__(self) -> str:
        return f"Summarize(summary_words={self.summary_words})"

    async def prepare(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Apply the fallback stubs' remembered cutoff before a request (a summary is not
        redone).

        Args:
            messages: The conversation that is about to be sent.
            ctx: What else counts against the window.

        Returns:
            The result, or None when nothing changes (or there are no fallback stubs).
        """
        return None if self.stubs is None else await self.stubs.prepare(messages, ctx)

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Summarise the oldest turns; stub instead when that fails (with `fallback_to_stubs`).

        Args:
            messages: The conversation that does not fit.
            ctx: Why it runs, which round, and `extra["summarize"]`.

        Returns:
            The result, or None when neither the summary nor the stubs helped.
        """
        try:
            result = await self.attempt(messages, ctx)
        except ProviderError as exc:
            stubbed = None if self.stubs is None else await self.stubs.compact(messages, ctx)
            return _instead_of_summary(exc, stubbed, "stubbed tool output instead")
        if result is None and self.stubs is not None:
            return await self.stubs.compact(messages, ctx)
        return result

    def choose_cut(self, messages: Sequence[Message], ctx: CompactionContext) -> int | None:
        """Where to cut the conversation: the kept part is `messages[cut:]`.

        Args:
            messages: The conversation.
            ctx: Which round (after the first, only the newest turn is kept) and what counts.

        Returns:
            The index of the first kept message, or None when no cut is possible.
        """
        points = _cut_points(messages)
        if not points:
            return None
        if ctx.round > 1:
            return points[-1]
        summary_tokens = self.summary_words * 2
        target = self._target(messages, ctx)
        if target is None:
            target = self._est(messages, ctx) / 2
        for b in points:
            if self._est(messages[b:], ctx) + summary_tokens <= target:
                return b
        return points[-1]

    async def attempt(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Summarise once, with no fallback.

        Args:
            messages: The conversation.
            ctx: Which round and `extra["summarize"]`.

        Returns:
            The result, or None when there is nothing to summarise or it would not help.

        Raises:
            EmptyResponse: The model returned an empty summary.
            ProviderError: The summary request failed for good (after its retries).
        """
        summarize: Summarizer | None = ctx.extra.get("summarize")
        if summarize is None:
            return None
        cut = self.choose_cut(messages, ctx)
        if cut is None:
            return None
        old, kept = messages[:cut], messages[cut:]
        target = self._target(messages, ctx)
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


def _instead_of_summary(
    exc: ProviderError, stubbed: CompactionResult | None, what: str
) -> CompactionResult | None:
    """The stubs that stand in for a summary that failed, noting why (None: no stubs helped)."""
    if stubbed is None:
        return None
    return dataclasses.replace(
        stubbed, note=f"the summary failed ({type(exc).__name__}: {exc}); {what}"
    )


# -- the default ---------------------------------------------------------------------------------


class DefaultCompaction(_Estimating):
    """Stubs first; a summary when stubs cannot get below the target; stubs alone if the
    summary fails. What `Agent` uses when `compaction=None`.

    One `TokenEstimator` is shared by both strategies and calibrated by the agent from the
    provider's reported input tokens.

    Args:
        keep_last: How many newest messages the stubs keep whole when they can.
        ratio: The target, as a share of the provider's limit or the window.
        summarize: Whether to summarise when stubs are not enough.
        summary_words: How long a summary may be, in words.
        estimator: The token estimator; None for a fresh one.

    Attributes:
        name: "default".
        ratio: The target share of the limit.
        estimator: The token estimator both strategies share.
        stub: The stubbing strategy.
        summarizer: The summarising strategy, or None.
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
        super().__init__(ratio, estimator)
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
        """Forget the stubs' remembered cutoff."""
        self.stub.reset()

    async def prepare(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Apply the stubs' remembered cutoff before a request (a summary is not redone).

        Args:
            messages: The conversation that is about to be sent.
            ctx: What else counts against the window.

        Returns:
            The result, or None when nothing changes.
        """
        return await self.stub.prepare(messages, ctx)

    async def compact(
        self, messages: list[Message], ctx: CompactionContext
    ) -> CompactionResult | None:
        """Stub; when that is not enough, summarise; when the summary fails, keep the stubs.

        Args:
            messages: The conversation that does not fit.
            ctx: Why it runs, which round, and `extra["summarize"]`.

        Returns:
            The result ("stub", "summarize" or "stub+summarize"), or None when nothing helped.
        """
        before = self._est(messages, ctx)
        target = self._target(messages, ctx)
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
            return _instead_of_summary(exc, stubbed, "kept the stubs")
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
