"""Keeping the conversation inside the model's context window: the loop's compaction collaborator.

`ContextKeeper` holds the compaction strategy (a `Compactor`: `DefaultCompaction` unless the
user gave another) and the settings around it, and is asked by the request path at three points:

- `prepare`: before every request, apply what the strategy remembers (the stub cutoff of
  `StubOldToolOutput`), so later turns send the stubs up front instead of overflowing again;
- `compact` without an error: proactively, when the request path (`Requester._fit`) finds the
  estimate past `compaction_threshold` of the window;
- `compact` with the error: after the provider said the prompt is too long (`ContextOverflow`);
  each further overflow of the same step comes with a higher round, and the strategy sheds more.

Each compaction is announced (`CompactionStarted` / `CompactionFinished`). A summary the strategy
asks for is a `compaction` request, made through the caller's `summarize`, which runs it through
the same attempt loop as every other request. After each request the provider's count of input
tokens calibrates the strategy's estimator (`calibrate`). State that matters (the cutoff, the
calibration) lives in the strategy, so a keeper is cheap and testable alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._core._messages import Message
from ..errors import ContextOverflow
from ..events import CompactionFinished, CompactionReason, CompactionStarted, Event
from ..providers import ModelRequest, ToolSpec
from ._compaction import CompactionContext, CompactionResult, Compactor, Summarizer
from ._estimate import estimate_tokens


class ContextKeeper:
    def __init__(
        self,
        strategy: Compactor,
        *,
        system: str | None,
        emit: Callable[[Event], None],
    ) -> None:
        self.strategy = strategy
        self.system = system
        self.emit = emit

    @property
    def name(self) -> str:
        return str(getattr(self.strategy, "name", type(self.strategy).__name__))

    def estimate(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
        """The strategy's (calibrated) estimate of the prompt's tokens, else the heuristic."""
        estimator = getattr(self.strategy, "estimate", None)
        if callable(estimator):
            return int(estimator(messages, self.system, tools))
        return estimate_tokens(messages, self.system, tools)

    async def prepare(self, working: list[Message], tools: Sequence[ToolSpec]) -> list[Message]:
        """Apply what the strategy remembers; announced as a proactive compaction if it did."""
        prepare = getattr(self.strategy, "prepare", None)
        if not callable(prepare):
            return working
        ctx = CompactionContext("proactive", 0, None, self.system, tuple(tools))
        result: CompactionResult | None = await prepare(list(working), ctx)
        if result is None:
            return working
        self.emit(
            CompactionStarted(
                reason="proactive", tokens_before=result.tokens_before, strategy=self.name
            )
        )
        self._finished(result)
        return list(result.messages)

    async def compact(
        self,
        working: list[Message],
        tools: Sequence[ToolSpec],
        summarize: Summarizer,
        error: ContextOverflow | None,
        round_: int,
        *,
        target: int | None,
    ) -> list[Message] | None:
        """Compact `working` towards `target` tokens: before sending (`error` None), or after
        the provider's overflow `error` (round 1, 2, ... within one step); None when the
        strategy has nothing left to shed."""
        before = self.estimate(working, tools)
        reason: CompactionReason = "overflow" if error else "proactive"
        self.emit(CompactionStarted(reason=reason, tokens_before=before, strategy=self.name))
        ctx = CompactionContext(
            reason,
            round_,
            error,
            self.system,
            tuple(tools),
            extra={"target_tokens": target, "summarize": summarize},
        )
        result = await self.strategy.compact(list(working), ctx)
        if result is None:
            nothing = CompactionResult(
                working, before, before, self.name, 0, "nothing left to shed"
            )
            self._finished(nothing, ok=False)
            return None
        self._finished(result)
        return result.messages

    def calibrate(self, request: ModelRequest, reported: int | None) -> None:
        """Teach the strategy's estimator what the provider counted for `request`."""
        observe = getattr(self.strategy, "observe", None)
        if callable(observe) and reported:
            observe(estimate_tokens(request.messages, request.system, request.tools), reported)

    def _finished(self, result: CompactionResult, *, ok: bool = True) -> None:
        self.emit(
            CompactionFinished(
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                strategy=result.strategy,
                removed=result.removed,
                ok=ok,
                message=result.note,
            )
        )
