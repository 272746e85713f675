"""Driving a provider batch run: create, poll, collect, resubmit, until every item has its row.

Each batch record of the state (`_provider_state`) is driven by one task:

    planned ──(its backoff)──> creating ──> running ──> ended ──> collected
                                  │                                   │
                                  └─(the create failed for good)─> failed   └─> a planned record
                                                                             of the retryable items

* **create** goes through the one attempt loop (`AttemptLoop`, the policy's attempts: 429,
  5xx and timeouts retried, Retry-After honoured). A create whose answer never came may have
  made a batch: before every create but the first (and before the first after a resume), the
  provider's recent batches are looked through and the one this record made is adopted
  (`BatchClient.adopt`), so a lost answer never makes a second batch.
* **poll**: `retrieve` through the attempt loop, then a wait that grows from `poll[0]` to
  `poll[1]` seconds (×1.5 a poll), never shorter than a Retry-After the provider sent.
* **collect**: the results, streamed; each line is matched to its prompt by its custom id
  (`<run>-<position>-<submission>`, never by its place in the file), read as a live answer is
  (`BatchClient.read`; with `output=`, checked as a live attempt checks it), and its failure
  decided by the one `decide` (classify's table under the retry policy; `_provider_items`). A
  download that breaks off is read again (lines already read count once). An item the results
  do not mention gets what its batch's end says: expired, canceled, or the batch's own failure.
* **resubmit**: the items whose decision is "retry" or "reask" go into a new record of the
  next submission, after the policy's backoff for that submission (a reasked item with its
  failed answer and the errors after its prompt); everything else is final, so an answered
  item is never sent (or billed) again.

Stopping (the view's Stop, `handle.cancel()`, Ctrl-C during `map`) cancels every batch at the
provider, goes on polling until each has ended (at most `CANCEL_WAIT_S`) and collects what
finished; nothing is resubmitted. Time is the injected clock's, so tests run in virtual time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

from .._core._attempts import AttemptLoop
from .._core._decision import AttemptState, Decision, may_have_reached
from ..errors import (
    Aborted,
    NbAgentError,
    ProviderError,
    error_class,
)
from ..events import Event
from ..providers._batch_client import BatchClient
from ..providers._batch_wire import BatchStatus, ItemResult
from ._provider_items import ItemOutcomes
from ._provider_output import Tail
from ._provider_state import BatchRecord, custom_id, parse_custom_id

POLL_GROWTH = 1.5
CANCEL_WAIT_S = 900.0
"""How long a stopped run waits for the provider to finish cancelling (OpenAI: up to 10 min)."""


class ProviderRun(ItemOutcomes):
    """One run over the state's batch records (see the module docstring); what each item it
    reads ends as is its `ItemOutcomes` part."""

    # -- the whole run ----------------------------------------------------------------------

    async def run_records(self) -> None:
        if not self.state.batches:
            self.plan(range(len(self.state.prompts)), 1)
            self.state.save()  # before anything is sent
        try:
            for rec in list(self.state.batches):
                self._spawn(rec)
            while self._tasks:
                done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    self._tasks.discard(task)
                    task.result()  # a bug in nbagent surfaces here, not lost in a task
        finally:
            for task in self._tasks:
                task.cancel()
        why = "the batch was stopped before this prompt was sent"
        for pos, reason in enumerate(self.item_rows.end_reason):
            if reason is None:  # not ended
                self.item_rows.final(pos, Aborted(why))
                self.progress.mark(pos, "cancelled")
        self.progress.changed(True)

    def _spawn(self, rec: BatchRecord) -> None:
        self._tasks.add(asyncio.ensure_future(self.drive(rec)))

    async def _sleep(self, seconds: float) -> None:
        """Wait on the clock; a stop ends the wait early (a wait begun after it does not)."""
        if seconds <= 0:
            return
        if self.control.cancelled:
            await self.clock.sleep(seconds)
            return
        sleep = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await self.control.until(sleep)
        finally:
            sleep.cancel()

    # -- planning ---------------------------------------------------------------------------

    def items(self, rec: BatchRecord) -> Iterator[bytes]:
        """The encoded items of a record, built from the prompts as the live request is."""
        for pos in rec.positions():
            yield self.item(pos, rec.submission, rec.tails.get(str(pos)))

    def item(self, pos: int, submission: int, tail: Any = None) -> bytes:
        """One item: the prompt's request (with `output=`, the structured answer's system
        prompt, output tool and format; after a reask, the failed answer and its errors)."""
        req, client, out = self.state.request, self.client, self.output
        request = client.request(
            self.state.prompts[pos],
            system=req["system"] if out is None else out.system(req["system"]),
            max_tokens=req["max_tokens"],
            options=req["options"],
            tools=() if out is None else out.tools,
            output=None if out is None else out.plan.format,
            after=Tail.from_json(tail).messages if tail else (),
        )
        cid = custom_id(self.state.tag, pos, submission)
        return client.item(cid, client.request_body(request))

    def plan(
        self,
        positions: Any,
        submission: int,
        delay_s: float = 0.0,
        tails: dict[int, Any] | None = None,
        attempts: dict[int, AttemptState] | None = None,
    ) -> list[BatchRecord]:
        """Records for `positions` (with their `tails`: what a reasked item's request carries
        after its prompt), split so that none passes the provider's caps."""
        caps, client = self.client.caps, self.client
        tails = tails or {}
        made: list[BatchRecord] = []
        chunk: list[int] = []
        size = 0

        def close() -> None:
            if chunk:
                rec = self.state.add(
                    submission,
                    chunk,
                    not_before=time.time() + delay_s,
                    tails=tails,
                    attempts=attempts,
                )
                rec.size = size
                made.append(rec)

        for pos in positions:
            item = self.item(pos, submission, tails.get(pos))
            if len(item) + client.overhead(1) > caps.max_bytes:
                self.fail(pos, submission, None, _too_large(client, len(item), caps.max_bytes))
                continue
            full = len(chunk) >= caps.max_requests
            if full or size + len(item) + client.overhead(len(chunk) + 1) > caps.max_bytes:
                close()
                chunk, size = [], 0
            chunk.append(pos)
            size += len(item)
        close()
        return made

    # -- one record -------------------------------------------------------------------------

    async def drive(self, rec: BatchRecord) -> None:
        if rec.step == "collected":
            await self.collect(rec, await self.retrieve(rec), replay=True)
            return
        if rec.step == "failed":
            self.fail_all(rec, _error_named(rec.error or "NbAgentError: it could not be created"))
            return
        if rec.step in ("planned", "creating"):
            if not self.control.cancelled:
                await self._sleep(max(0.0, rec.not_before - time.time()))
            if self.control.cancelled and rec.step == "planned":
                return  # never sent: the run's end gives these rows `cancelled`
            status = await self.create(rec)
            if status is None:
                return
            self._show(rec, status)
        status = await self.poll(rec)
        if status is not None:
            await self.collect(rec, status)

    async def create(self, rec: BatchRecord) -> BatchStatus | None:
        adopt_first = rec.step == "creating"  # a create may have been sent before a restart
        rec.step = "creating"
        if rec.create_began is None:
            rec.create_began = time.time()
        self.state.save()
        size = rec.size if rec.size is not None else sum(len(b) for b in self.items(rec))

        async def adopt() -> BatchStatus | None:
            since = rec.create_began or time.time()
            known = self.state.known_ids()
            return await self.client.adopt(rec.tag, since=since, count=rec.count, known=known)

        async def attempt(n: int) -> BatchStatus:
            if n > 1 or adopt_first:
                found = await adopt()
                if found is not None:
                    return found
            return await self.client.create(
                lambda: self.items(rec), count=rec.count, size=size, tag=rec.tag
            )

        try:
            status = await self._loop("create").run(attempt)
        except Exception as err:
            found = None
            if may_have_reached(err):  # one more look
                with contextlib.suppress(Exception):
                    found = await adopt()
            if found is None:
                rec.step, rec.error = "failed", f"{type(err).__name__}: {err}"
                self.state.save()
                self.fail_all(rec, err)
                return None
            status = found
        rec.id = status.id
        rec.step = "ended" if status.phase == "ended" else "running"
        self.state.save()
        for pos in rec.positions():
            self.progress.mark(pos, "running")
        self.progress.changed()
        return status

    async def retrieve(self, rec: BatchRecord) -> BatchStatus:
        assert rec.id is not None
        batch_id = rec.id
        return await self._loop("poll").run(lambda _n: self.client.retrieve(batch_id))

    async def poll(self, rec: BatchRecord) -> BatchStatus | None:
        first, most = self.poll_s
        delay = first
        while True:
            try:
                status = await self.retrieve(rec)
            except Exception as err:  # final (a 401, a batch that is gone): the rows say so
                self.fail_all(rec, err, why="the batch can no longer be read")
                return None
            self._show(rec, status)
            if status.phase == "ended":
                break
            if self.control.cancelled:
                if not rec.cancel_sent:
                    with contextlib.suppress(ProviderError):
                        status = await self.client.cancel(status.id)
                    rec.cancel_sent = True
                    self.state.save()
                    self._show(rec, status)
                    continue
                if self.stopped_at is None:
                    self.stopped_at = self.clock.now()
                if self.clock.now() - self.stopped_at > CANCEL_WAIT_S:
                    return None  # still cancelling: the state file can collect it later
            if rec.step != status.phase:
                rec.step = status.phase
                self.state.save()
            wait = max(delay, status.retry_after or 0.0)
            info = self.progress.batches[rec.n]
            info["next_poll_in"], info["next_poll_set"] = wait, time.monotonic()
            await self._sleep(wait)
            delay = min(most, delay * POLL_GROWTH)
        rec.step = "ended"
        self.state.save()
        return status

    # -- results ----------------------------------------------------------------------------

    async def collect(self, rec: BatchRecord, status: BatchStatus, *, replay: bool = False) -> None:
        members = set(rec.positions())
        seen: set[int] = set()
        started = self.progress.batches.get(rec.n, {}).get("created_at", self.clock.now())
        retry: dict[int, Decision] = {}  # the items sent again
        # on a replay, the items a later record of the state sent again
        later = (
            {p for b in self.state.batches if b.submission > rec.submission for p in b.positions()}
            if replay
            else set()
        )

        async def take(pos: int, item: ItemResult) -> None:
            seen.add(pos)
            decision = await self.outcome(rec, pos, item, started)
            if decision is None:
                return
            again = decision.action in ("retry", "reask") and (
                pos in later if replay else not self.control.cancelled
            )
            self.decided(rec, pos, decision, again, started)
            if again:
                retry[pos] = decision

        async def read_all(_n: int) -> None:
            failure = status.failure
            if failure is not None:
                return
            async with contextlib.aclosing(self.client.results(status)) as lines:
                async for item in lines:
                    parsed = parse_custom_id(self.state.tag, item.custom_id)
                    if parsed is None or parsed[1] != rec.submission:
                        continue
                    pos = parsed[0]
                    if pos in members and pos not in seen:
                        await take(pos, item)
                        if len(seen) % 1000 == 0:
                            self.progress.changed()

        try:
            await self._loop("results").run(read_all)
        except Exception as err:
            for pos in sorted(members - seen):
                seen.add(pos)
                self.decided(rec, pos, Decision("fail", err), False, started)
        for pos in sorted(members - seen):
            await take(pos, self.missing(status, pos, rec))
        if retry and not replay:
            delay = max((d.plan.delay_s for d in retry.values() if d.plan), default=0.0)
            # what each carries after its prompt (a reask's pair), and its attempt state
            tails = {p: self.tail(rec, p, d) for p, d in retry.items()}
            states = {p: d.state for p, d in retry.items()}
            new = self.plan(list(retry), rec.submission + 1, delay, tails, states)
            self.progress.resubmissions += len(new)
        else:
            new = []
        rec.step = "collected"
        self.state.save()  # the record collected and its follow-up planned: in one write
        self.progress.batches.setdefault(rec.n, {})["collected"] = True
        self.progress.changed()
        for follow in new:
            self._show(follow)
            self._spawn(follow)

    # -- plumbing ---------------------------------------------------------------------------

    def _loop(self, what: str) -> AttemptLoop:
        return AttemptLoop(
            self.policy,
            clock=self.clock,
            emit=self._emit,
            model=f"{self.client.name}:{what}",
            provider=self.client.name,
            rng=self.rng,
        )

    def _emit(self, event: Event) -> None:
        if self.progress.count(event):
            self.progress.changed()

    def _show(self, rec: BatchRecord, status: BatchStatus | None = None) -> None:
        """Tell the view about a record: planned (no status yet), or as the provider said."""
        info = self.progress.batches.setdefault(rec.n, {})
        if info.get("id") is None:  # planned, or created now
            info["created_at"], info["seen_at"] = self.clock.now(), time.monotonic()
        info.update(
            id=status.id if status else None,
            status=status.status if status else "planned",
            phase=status.phase if status else "planned",
            submission=rec.submission,
            items=rec.count,
            counts=dict(status.counts) if status else {},
        )
        self.progress.changed()


def _error_named(text: str) -> BaseException:
    """The error a record's `error` ("Kind: message") names, rebuilt for its rows."""
    kind, _, message = text.partition(": ")
    cls = error_class(kind, NbAgentError)
    if cls is not None:
        with contextlib.suppress(TypeError):
            return cls(message)
    return NbAgentError(text)


def _too_large(client: BatchClient, size: int, cap: int) -> ProviderError:
    from ..errors import BadRequest

    return BadRequest(
        f"this request ({size} bytes) is larger than one {client.label} batch may be ({cap} bytes)",
        provider=client.name,
        code="request_too_large",
    )
