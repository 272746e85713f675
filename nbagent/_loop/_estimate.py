"""Estimating a prompt's tokens without the provider: a heuristic, calibrated by what it reports.

Good enough to decide when to compact before sending; `TokenEstimator` learns the ratio between
the heuristic and the provider's count from every request that went through.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core._messages import (
    ImageBlock,
    Message,
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..providers._base import ToolSpec

IMAGE_TOKENS = 1000
CHARS_PER_TOKEN = 4


def _block_chars(block: Any) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ImageBlock):
        return IMAGE_TOKENS * CHARS_PER_TOKEN
    if isinstance(block, ToolUseBlock):
        return len(block.name) + len(block.raw_input or json.dumps(block.input))
    if isinstance(block, ToolResultBlock):
        return sum(_block_chars(p) for p in block.content) + 8
    if isinstance(block, ThinkingBlock):
        return len(block.thinking)
    if isinstance(block, RedactedThinkingBlock):
        return len(block.data)
    if isinstance(block, OpaqueBlock):  # encrypted reasoning runs to kilobytes
        return len(json.dumps(block.data))
    return 0


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


@dataclass(kw_only=True, eq=False)
class TokenEstimator:
    """`estimate_tokens`, scaled by a ratio learned from what the provider reports.

    `observe(estimated, reported)` takes the raw heuristic estimate of a request that went
    through and the input tokens the provider counted for it; the ratio moves towards
    reported/estimated (an exponential average, clamped to `min_ratio`..`max_ratio`). Samples
    from tiny requests, and implausible ones (a provider that leaves cached tokens out of
    `input_tokens`, a test double that always says 10), are ignored.

    The heuristic is characters / 4; the ratio corrects it for the model's tokenizer, so the
    agent can compact before sending instead of waiting for an overflow.

    Made with keywords only; out-of-range values are brought into range.

    Attributes:
        ratio: The ratio learned so far (given: the starting ratio).
        smoothing: How far each sample moves the ratio (0..1; 1 takes the latest alone).
        min_ratio: The smallest ratio allowed.
        max_ratio: The largest ratio allowed.
        min_sample: Requests estimated below this many tokens teach nothing.
        samples: How many requests it learned from.
    """

    ratio: float = 1.0
    smoothing: float = 0.5
    min_ratio: float = 0.75
    max_ratio: float = 4.0
    min_sample: int = 100
    samples: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.max_ratio = max(self.min_ratio, self.max_ratio)
        self.smoothing = min(1.0, max(0.0, self.smoothing))
        self.min_sample = max(1, self.min_sample)
        self.ratio = self._clamp(self.ratio)

    def __repr__(self) -> str:
        return f"TokenEstimator(ratio={self.ratio:.3f}, samples={self.samples})"

    def _clamp(self, ratio: float) -> float:
        return min(self.max_ratio, max(self.min_ratio, ratio))

    def raw(
        self, messages: Sequence[Message], system: str | None = None, tools: Sequence[ToolSpec] = ()
    ) -> int:
        """The heuristic estimate, unscaled (what `observe` wants as `estimated`).

        Args:
            messages: As for [`estimate`][nbagent.TokenEstimator.estimate].
            system: As for [`estimate`][nbagent.TokenEstimator.estimate].
            tools: As for [`estimate`][nbagent.TokenEstimator.estimate].

        Returns:
            Tokens, by characters / 4.
        """
        return estimate_tokens(messages, system, tools)

    def estimate(
        self, messages: Sequence[Message], system: str | None = None, tools: Sequence[ToolSpec] = ()
    ) -> int:
        """The estimate, scaled by the learned ratio.

        Args:
            messages: The conversation.
            system: The system prompt.
            tools: The tools sent with it.

        Returns:
            Tokens, rounded up.
        """
        return math.ceil(self.raw(messages, system, tools) * self.ratio)

    __call__ = estimate

    def observe(self, estimated: int, reported: int | None) -> bool:
        """Learn from one request that went through.

        Args:
            estimated: Its raw heuristic estimate (`raw`).
            reported: The input tokens the provider counted for it, or None.

        Returns:
            True when the sample was used; False for a tiny or implausible one.
        """
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
