"""How one item's result becomes its row: read as a live answer is, checked, and decided.

A succeeded item's answer is read by the live stream's reader (`BatchClient.read`), checked for
emptiness and (with `output=`) against its schema as a live attempt checks it, and recorded. A
failed one (an errored item, an answer refused afterwards, an item its batch's end left out)
goes to the one `decide` under the retry policy, with the item's `AttemptState` (kept in the
state file by its record, stepped by the decision as the live attempt loop's is). The decision
is then recorded: a resubmission ("retry", "reask") or the row's end.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._core._clock import Clock, RealClock
from .._core._decision import Decision, Failure, decide
from .._core._retry import RetryPolicy
from .._loop._output_step import answer_limit
from .._loop._stream import empty_reply
from ..errors import (
    Aborted,
    NbAgentError,
    OutputInvalid,
    OutputTruncated,
    ProviderError,
    StreamInterrupted,
)
from ..providers._anthropic_batch import expired_error
from ..providers._batch_client import BatchClient
from ..providers._batch_wire import BatchStatus, ItemResult
from ._progress import BatchProgress
from ._provider_events import ItemEvents
from ._provider_output import BatchOutput
from ._provider_state import BatchRecord, ProviderState, custom_id
from ._spec import BatchControl

DEFAULT_POLL = (5.0, 60.0)
"""Seconds between polls: the first wait, and the most it grows to."""


class ItemOutcomes:
    """The outcomes of one run's items (see the module docstring), the item part of a
    `ProviderRun`: made with what the run is given (how each request is built is the state's
    `request`), it makes its progress and its stop control."""

    item_rows: ItemEvents  # the items' events and rows: made when the run begins

    def __init__(
        self,
        client: BatchClient,
        state: ProviderState,
        *,
        policy: RetryPolicy,
        clock: Clock | None,
        poll: tuple[float, float] = DEFAULT_POLL,
        output: BatchOutput | None = None,
        log: Any = None,
    ) -> None:
        self.client, self.state, self.policy = client, state, policy
        self.clock = clock or RealClock()
        self.poll_s, self.output = poll, output  # seconds between polls; `output=`'s answers
        self.log = log  # the durable log (`log=`): a path or a connection, or None
        self.rng = policy.rng()
        self.progress = BatchProgress(total=len(state.prompts), backend="provider")
        self.progress.state_path = str(state.path)
        self.control = BatchControl()
        self._answered: dict[int, str | None] = {}  # request ids of answers refused afterwards
        self.stopped_at: float | None = None  # when the run first saw its control stopped
        self._tasks: set[asyncio.Task[None]] = set()  # the run's records being driven

    def missing(self, status: BatchStatus, pos: int, rec: BatchRecord) -> ItemResult:
        """What an item the ended batch's results do not mention ended as: the batch's own
        failure, its expiry, its cancellation, or a result that never came."""
        cid = custom_id(self.state.tag, pos, rec.submission)
        if status.failure is not None:
            return ItemResult(cid, "errored", error=self.client.failure_error(status))
        if status.counts.get("expired") or status.ending == "expired":
            why = "the batch expired before this request was processed"
            return ItemResult(cid, "expired", error=expired_error(self.client.name, why))
        if status.counts.get("canceled") or status.ending == "canceled":
            return ItemResult(cid, "canceled")
        err = StreamInterrupted(
            "the batch ended without a result for this request", provider=self.client.name
        )
        return ItemResult(cid, "errored", error=err)

    async def outcome(
        self, rec: BatchRecord, pos: int, item: ItemResult, started: float
    ) -> Decision | None:
        """Record a succeeded item (None), or the decision about a failed one."""
        now = self.clock.now()
        if item.kind == "succeeded":
            out, checked = self.output, None
            try:
                done = await self.client.read(item)
                empty = empty_reply(done, self.client.name)
                if empty is not None:
                    raise empty
                if out is not None:  # as a live attempt checks its answer
                    req = self.state.request
                    limit = answer_limit(req["max_tokens"], req["options"])
                    checked = out.check(done, limit)
            except (ProviderError, OutputInvalid, OutputTruncated) as err:
                if not isinstance(err, ProviderError):  # an answer refused afterwards: its id
                    self._answered[pos] = done.request_id or done.response_id
                return self.decide(rec, pos, err)
            self.item_rows.succeeded(pos, rec.submission, rec.id, done, started, now, checked)
            self.progress.mark(pos, "ok")
            return None
        if item.kind == "canceled":
            return Decision("fail", Aborted("the batch was cancelled before this request ran"))
        assert item.error is not None
        return self.decide(rec, pos, item.error)

    def decide(self, rec: BatchRecord, pos: int, err: NbAgentError) -> Decision:
        """The one `decide` about an item's failure, with the attempt state its record sent."""
        out = self.output
        facts = Failure(err, rec.attempt_state(pos), max_reasks=out.retries if out else 0)
        return decide(facts, self.policy, rng=self.rng)

    def tail(self, rec: BatchRecord, pos: int, decision: Decision) -> Any:
        """What the item's next request carries after its prompt: a new reask's pair, or (a
        retry) the tail it was sent with."""
        before = rec.tails.get(str(pos))
        out, err = self.output, decision.error
        if decision.action != "reask" or out is None or not isinstance(err, OutputInvalid):
            return before
        return out.tail(err).to_json()

    def decided(
        self, rec: BatchRecord, pos: int, decision: Decision, again: bool, started: float
    ) -> None:
        """Record the decision about an item: sent `again` (a retry, a reask) or its row's
        end (a stopped run turns a resubmission into `cancelled`)."""
        err = decision.error
        if not again:
            if decision.action in ("retry", "reask") and not isinstance(err, Aborted):
                # retryable, but the run was stopped: the row says so, with what it had
                err = Aborted(f"the batch was stopped before this request was sent again ({err})")
            decision = Decision("fail", err, None, decision.why)
        answered = self._answered.pop(pos, None)
        self.item_rows.failed(
            pos, rec.submission, rec.id, decision, started, self.clock.now(), answered
        )
        if not again:
            self.progress.mark(pos, "cancelled" if isinstance(err, Aborted) else "failed")
            return
        if decision.action == "reask" and self.item_rows.reasks[pos] == 1:
            self.progress.reasked += 1  # the view counts the items reasked at least once
        self.progress.mark(pos, "waiting")

    def fail_all(self, rec: BatchRecord, err: BaseException, why: str = "") -> None:
        """End every row of `rec` not yet ended with `err` (a batch that cannot be made or
        read any more)."""
        for pos in rec.positions():
            if self.item_rows.end_reason[pos] is None:
                self.fail(pos, rec.submission, rec.id, err, why)
        self.progress.changed()

    def fail(
        self, pos: int, submission: int, batch_id: str | None, err: BaseException, why: str = ""
    ) -> None:
        """End the row of the item at `pos` with `err`, now (its lane: failed)."""
        now = self.clock.now()
        self.item_rows.failed(pos, submission, batch_id, Decision("fail", err, None, why), now, now)
        self.progress.mark(pos, "failed")
