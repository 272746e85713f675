"""The agent's side of compaction: running a strategy, the summary request, calibration.

A mixin of `Agent`, kept apart so the loop in `agent.py` reads as the decisions it makes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._core._messages import Message
from ..errors import Action, ContextOverflow, ProviderError, classify
from ..events import (
    AttemptFailed,
    AttemptStarted,
    CompactionFinished,
    CompactionStarted,
)
from ..providers._base import ModelRequest
from ._compaction import CompactionContext, estimate_tokens
from ._results import StreamFailed, error_fields

if TYPE_CHECKING:
    import random

    from .._core._clock import Clock
    from .._core._retry import RetryPlan, RetryPolicy
    from ..events import Event
    from ..providers._base import Completed, Provider
    from ._compaction import Compactor
    from ._results import RunState
    from ._tools import Toolbox

__all__ = ["CompactingMixin"]


class CompactingMixin:
    if TYPE_CHECKING:
        compaction: Compactor
        system: str | None
        toolbox: Toolbox
        retry: RetryPolicy
        clock: Clock
        max_tokens: int
        _run: RunState | None
        _providers: list[Provider]
        _rng: random.Random

        def _emit(self, cls: type[Event], **fields: Any) -> None: ...

        def _model_name(self, run: RunState) -> str: ...

        def _attempt_cancelled(self, phase: str, attempt: int, model: str) -> None: ...

        def _attempt_succeeded(
            self, phase: str, attempt: int, model: str, completed: Completed, ttft: float | None
        ) -> None: ...

        async def _wait_for_retry(
            self,
            phase: str,
            attempt: int,
            model: str,
            plan: RetryPlan,
            info: dict[str, Any],
            failed: StreamFailed,
        ) -> None: ...

        async def _stream_once(
            self, provider: Provider, request: ModelRequest, attempt: int, *, quiet: bool = False
        ) -> tuple[Completed, float | None]: ...

    def _estimate(self, working: Sequence[Message], specs: Sequence[Any]) -> int:
        estimator = getattr(self.compaction, "estimate", None)
        if callable(estimator):
            return int(estimator(working, self.system, specs))
        return estimate_tokens(working, self.system, specs)

    async def _compact(
        self,
        working: list[Message],
        error: ContextOverflow | None,
        round_: int,
        *,
        target: int | None = None,
    ) -> list[Message] | None:
        specs = tuple(await self.toolbox.specs())
        before = self._estimate(working, specs)
        name = getattr(self.compaction, "name", type(self.compaction).__name__)
        reason = "overflow" if error else "proactive"
        self._emit(CompactionStarted, reason=reason, tokens_before=before, strategy=name)
        ctx = CompactionContext(
            reason,
            round_,
            error,
            self.system,
            specs,
            extra={"target_tokens": target, "summarize": self._summarize},
        )
        result = await self.compaction.compact(list(working), ctx)
        if result is None:
            self._emit(
                CompactionFinished,
                tokens_before=before,
                tokens_after=before,
                strategy=name,
                removed=0,
                ok=False,
                message="nothing left to shed",
            )
            return None
        self._emit(
            CompactionFinished,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            strategy=result.strategy,
            removed=result.removed,
            ok=True,
            message=result.note,
        )
        return result.messages

    async def _summarize(self, messages: Sequence[Message], instruction: str) -> str:
        """Ask the current model for a summary: a `compaction` request under the same policy.

        Raises the final error when the summary cannot be had, so the strategy can fall back.
        """
        run = self._run
        assert run is not None
        provider = self._providers[run.model_index]
        model = self._model_name(run)
        policy = self.retry
        request = ModelRequest(
            (*messages, Message.user(instruction)),
            system="You summarise conversations faithfully and briefly.",
            max_tokens=min(self.max_tokens, 2048),
        )
        attempt = 0
        while True:
            attempt += 1
            self._emit(
                AttemptStarted,
                phase="compaction",
                attempt=attempt,
                max_attempts=policy.max_attempts,
                model=model,
            )
            try:
                completed, ttft = await self._stream_once(provider, request, attempt, quiet=True)
            except asyncio.CancelledError:
                self._attempt_cancelled("compaction", attempt, model)
                raise
            except StreamFailed as failed:
                err = failed.error
                if isinstance(err, ProviderError):
                    err = policy.escalate(err)
                plan = None
                if classify(err) is Action.RETRY:
                    left = None if run.deadline is None else run.deadline - self.clock.now()
                    plan = policy.plan(err, attempt, rng=self._rng, time_left=left)
                info = error_fields(err)
                self._emit(
                    AttemptFailed,
                    phase="compaction",
                    attempt=attempt,
                    max_attempts=policy.max_attempts,
                    model=model,
                    action="retry" if plan else "fail",
                    ttft_s=failed.ttft,
                    **info,
                )
                if plan is None:
                    raise err from None
                await self._wait_for_retry("compaction", attempt, model, plan, info, failed)
                continue
            run.usage = run.usage + completed.usage
            self._attempt_succeeded("compaction", attempt, model, completed, ttft)
            return completed.message.text

    def _calibrate(self, request: ModelRequest, reported: int | None) -> None:
        """Teach the compactor's token estimator what the provider counted for `request`."""
        observe = getattr(self.compaction, "observe", None)
        if callable(observe) and reported:
            observe(estimate_tokens(request.messages, request.system, request.tools), reported)

    async def _apply_remembered(self, working: list[Message]) -> list[Message]:
        """Apply what the compactor remembers (e.g. its stub cutoff) before every request."""
        prepare = getattr(self.compaction, "prepare", None)
        if not callable(prepare):
            return working
        specs = tuple(await self.toolbox.specs())
        ctx = CompactionContext("proactive", 0, None, self.system, specs)
        result = await prepare(list(working), ctx)
        if result is None:
            return working
        name = getattr(self.compaction, "name", type(self.compaction).__name__)
        self._emit(
            CompactionStarted, reason="proactive", tokens_before=result.tokens_before, strategy=name
        )
        self._emit(
            CompactionFinished,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            strategy=result.strategy,
            removed=result.removed,
            ok=True,
            message=result.note,
        )
        return list(result.messages)
