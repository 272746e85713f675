"""Provider batch APIs on the mock server: the store every batch lives in, its clock, its counters.

A client of Anthropic's Message Batches, OpenAI's Batch API or Gemini's batch mode meets there
what a live client never does: a create that is accepted and then takes hours, items that end
one by one in any order, an expiry that keeps part of the work, a results file to download. The
mock answers all three on its own host, over real HTTP, so nbagent's batch backend and the
official SDKs can be tested against the same bytes in seconds.

**Endpoints** (paths as the providers and their SDKs write them; OpenAI's also under Azure's
``/openai/`` and ``/openai/v1/`` prefixes):

- Anthropic: ``POST /v1/messages/batches``; ``GET /v1/messages/batches/{id}``;
  ``GET /v1/messages/batches`` (``after_id``, ``before_id``, ``limit``);
  ``POST .../{id}/cancel``; ``DELETE .../{id}``; ``GET .../{id}/results`` (the
  ``results_url``, on the mock's own host).
- OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``); ``GET /v1/files``;
  ``GET /v1/files/{id}``; ``GET /v1/files/{id}/content``; ``DELETE /v1/files/{id}``;
  ``POST /v1/batches``; ``GET /v1/batches/{id}``; ``GET /v1/batches`` (``after``, ``limit``);
  ``POST /v1/batches/{id}/cancel``.
- Gemini: ``POST /v1beta/models/{m}:batchGenerateContent`` (inline requests);
  ``GET /v1beta/batches/{id}``; ``GET /v1beta/batches`` (``pageSize``, ``pageToken``);
  ``POST /v1beta/batches/{id}:cancel``; ``DELETE /v1beta/batches/{id}``; also under ``/v1/``,
  where the genai SDK calls them (a ``/v1/batches/...`` request is Gemini's when it carries
  ``x-goog-api-key`` or ``?key=``, names a Gemini batch, or pages with ``pageSize``).

**Options** (``MockServer(...)``, and the flags of ``nbagent serve``):

- ``batch_duration_s`` (default 2.0; ``--batch-duration``): how long a batch runs on the batch
  clock. Its first tenth is spent validating (OpenAI ``validating``, Gemini
  ``BATCH_STATE_PENDING``), its items end one by one over the next eight tenths, in a shuffled
  order, and the last tenth is OpenAI's ``finalizing``.
- ``expire_after_s`` (default None; ``--expire-after``): a batch still running that long after
  its creation expires. Items ended by then keep their answers; the rest are Anthropic
  ``expired`` results and OpenAI ``batch_expired`` lines in the error file; a Gemini batch
  that expires has no results at all (``BATCH_STATE_EXPIRED``), as Gemini documents.
- ``batch_clock`` (default ``time.time``): the clock batches run on, in seconds since the epoch
  (its readings become the batches' timestamps); ``MockServer.advance_batches(seconds)`` moves
  it forward, so a test or a notebook never waits.

A cancel takes a tenth of the duration to settle (Anthropic ``canceling``, OpenAI
``cancelling``), the items that end meanwhile keep their answers, and the rest are canceled.

**Items** are answered as live requests are: each takes the next entry of the fault script
without a target, in submission order, when the batch is created (``faults=["ok", "500",
"invalid"]`` makes the second item errored with an ``api_error`` and the third with an
``invalid_request_error``), and the responder (the demo model) answers the rest in the
provider's non-streamed body (an Anthropic Message, a ``chat.completion`` or a Responses object,
a ``GenerateContentResponse``) when the results are read. ``overloaded``/``529`` give an
overloaded error, ``quota`` the provider's out-of-credit error (Anthropic: "Your credit balance
is too low ..."), ``overflow`` and a prompt larger than ``context_window`` a prompt-too-long
error, ``empty`` an empty answer; a request its wire format refuses is an errored item with the
invalid-request error that names the field. Kinds that break a connection (``close``,
``drop_after_tokens``, ``malformed``) make an item errored with a server error (there is no
connection per item), ``overloaded_midstream`` an overloaded one; ``stall`` and ``slow`` are
``ok``.

**Endpoint faults** are script entries with a target, ``create:429``, ``create:lost``,
``retrieve:503``, ``results:cut`` and so on: see `nbagent.mock.parse_fault`. A ``lost`` create
stores the batch, then closes the connection before answering; ``create:failed`` makes a batch
that is accepted and then fails (OpenAI ``failed`` with ``token_limit_exceeded`` in its
``errors``, Gemini ``BATCH_STATE_FAILED``; Anthropic has none, so there every item ends errored
with an ``api_error``).

**Counters and views**: ``MockServer.batch_counts`` (a `BatchCounts`: create requests received,
batches created and items submitted, per provider), ``MockServer.submitted_ids(provider)``
(how many times each custom id or key was submitted, over every batch), ``MockServer.batches``
and ``MockServer.batch(id)`` (`MockBatch` views: status, counts and each item's status as the
provider reports them now), ``MockServer.clear_batches()``.

Batches and their files are kept in memory, compactly: each item's request as one JSON line in
a batch-wide buffer, its fault, and an offset; answers are made when the results are read and
streamed out, never held.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import random
import secrets
import string
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._faults import Fault

__all__ = [
    "BatchCounts",
    "BatchStore",
    "ItemOutcome",
    "ItemStatus",
    "MockBatch",
    "Phase",
    "Provider",
]

Provider = Literal["anthropic", "openai", "azure", "gemini"]
"""Which API a batch was created through (Azure is OpenAI's Batch API under ``/openai/``)."""
ItemStatus = Literal["processing", "succeeded", "errored", "expired", "canceled"]
"""Where one item of a batch stands, in Anthropic's words (OpenAI and Gemini have no per-item
status on the wire; these are what their lines and responses say)."""
Phase = Literal[
    "validating",
    "in_progress",
    "finalizing",
    "canceling",
    "completed",
    "expired",
    "canceled",
    "failed",
]
"""Where a batch stands, in neutral words each provider module translates."""

LEAD = 0.1  # the share of the duration before the first item ends (validating / pending)
SPAN = 0.8  # the share over which the items end
CANCEL_SETTLE = 0.1  # the share of the duration a cancel takes to settle
DEFAULT_BATCH_DURATION_S = 2.0
_ALNUM = string.ascii_letters + string.digits


def new_id(prefix: str, length: int, alphabet: str = _ALNUM) -> str:
    """A random id in a provider's style (``msgbatch_01...``, ``batch_...``, ``file-...``)."""
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def stable_id(seed: str, index: int, length: int = 24) -> str:
    """An id that is the same each time an item's answer is made (downloads repeat)."""
    return hashlib.blake2b(f"{seed}/{index}".encode(), digest_size=16).hexdigest()[:length]


@dataclass(frozen=True)
class ItemOutcome:
    """What an item will be once it ends, decided when the batch is created.

    ``kind``: ``ok`` (answered by the responder; ``fault`` may be ``empty``), ``fault`` (an
    error from the fault script), ``invalid`` (the wire format refused the request:
    ``message``/``param``) or ``overflow`` (``tokens`` over the context window ``maximum``).
    """

    kind: Literal["ok", "fault", "invalid", "overflow"]
    fault: Fault = field(default_factory=Fault)
    message: str = ""
    param: str | None = None
    tokens: int = 0
    maximum: int = 0

    @property
    def errored(self) -> bool:
        return self.kind != "ok"


OK_OUTCOME = ItemOutcome("ok")
FAILED_OUTCOME = ItemOutcome("fault", Fault("500"))  # an item of a batch that failed


class Items:
    """The items of one batch, compactly: one JSON line each in a shared buffer, an id, an
    outcome. 100,000 items cost their request bytes plus a few dozen bytes each."""

    def __init__(self) -> None:
        self._blob: bytes | bytearray = bytearray()
        self._offsets = array("Q", [0])
        self.ids: list[str | None] = []
        self.outcomes: list[ItemOutcome] = []

    def add(self, custom_id: str | None, line: bytes, outcome: ItemOutcome) -> None:
        assert isinstance(self._blob, bytearray)
        self._blob += line
        self._offsets.append(len(self._blob))
        self.ids.append(custom_id)
        self.outcomes.append(outcome)

    def __len__(self) -> int:
        return len(self.ids)

    def line(self, index: int) -> bytes:
        return bytes(self._blob[self._offsets[index] : self._offsets[index + 1]])

    def freeze(self) -> None:
        if isinstance(self._blob, bytearray):
            self._blob = bytearray(self._blob)  # drop the over-allocation of growth

    @classmethod
    def over(
        cls, buffer: bytes, starts: list[int], ids: list[str | None], outcomes: list[ItemOutcome]
    ) -> Items:
        """Items whose lines are already in ``buffer`` (an uploaded file), one from each start
        to the next (the last to the end), so the file is not copied."""
        items = cls()
        items._blob = buffer
        items._offsets = array("Q", [*starts, len(buffer)])
        items.ids, items.outcomes = ids, outcomes
        return items


@dataclass(frozen=True)
class Snapshot:
    """A batch at one reading of the clock: its phase and how many items (in finish order)
    have ended with their own outcome."""

    phase: Phase
    finished: int
    now: float
    ended_at: float | None
    in_progress_at: float | None  # when validation ended, if it has
    finalizing_at: float | None  # when the last item ended, if it has


class Batch:
    """One batch in the store. Provider modules keep their own fields in ``extra``."""

    def __init__(
        self,
        batch_id: str,
        provider: Provider,
        items: Items,
        *,
        created: float,
        duration: float,
        expire_after: float | None,
        seed: int | None,
        extra: dict[str, Any],
    ) -> None:
        self.id = batch_id
        self.provider: Provider = provider
        self.items = items
        self.created = created
        self.duration = duration
        self.expire_after = expire_after if expire_after is not None and expire_after > 0 else None
        self.cancel_at: float | None = None
        self.deleted = False
        self.extra = extra
        self.failed: list[dict[str, Any]] = list(extra.get("errors") or [])
        self.keeps_partial = provider != "gemini"  # Gemini: expired or canceled means no output
        n = len(items)
        order = list(range(n))
        random.Random(f"{seed}/{batch_id}").shuffle(order)
        if n > 1 and order == sorted(order):  # results are never in request order
            order[0], order[1] = order[1], order[0]
        self.order = array("I", order)  # rank -> index: the order items end in
        self._rank: array[int] | None = None
        errored = [rank for rank, index in enumerate(order) if items.outcomes[index].errored]
        self._errored_ranks = errored  # sorted

    def __len__(self) -> int:
        return len(self.items)

    # --- time -----------------------------------------------------------------------------------

    def _finished_by(self, t: float) -> int:
        n = len(self.items)
        if self.duration <= 0:
            return n
        done = (t - self.created - LEAD * self.duration) * n / (SPAN * self.duration)
        return max(0, min(n, math.floor(done + 1e-9)))

    def _end(self) -> tuple[float, Phase]:
        ends: list[tuple[float, int, Phase]] = [(self.created + self.duration, 0, "completed")]
        if self.expire_after is not None and self.expire_after < self.duration:
            ends.append((self.created + self.expire_after, 1, "expired"))
        if self.cancel_at is not None:
            ends.append((self.cancel_at + CANCEL_SETTLE * self.duration, 2, "canceled"))
        at, _, phase = min(ends)
        return at, phase

    def snapshot(self, now: float) -> Snapshot:
        n = len(self.items)
        end_at, end_phase = self._end()
        lead_end = self.created + LEAD * self.duration
        if self.failed:  # it fails its validation
            if now >= lead_end:
                return Snapshot("failed", 0, now, lead_end, None, None)
            return Snapshot("validating", 0, now, None, None, None)
        last_at = self.created + (LEAD + SPAN) * self.duration
        started = lead_end if now >= lead_end else None
        if now >= end_at:
            finished = n if end_phase == "completed" else self._finished_by(end_at)
            if end_phase != "completed" and not self.keeps_partial:
                finished = 0
            started = lead_end if end_at >= lead_end else None
            final = last_at if end_at >= last_at else None
            return Snapshot(end_phase, finished, now, end_at, started, final)
        finished = self._finished_by(now)
        final = last_at if now >= last_at else None
        if self.cancel_at is not None and now >= self.cancel_at:
            return Snapshot("canceling", finished, now, None, started, final)
        if started is None:
            return Snapshot("validating", finished, now, None, None, None)
        if finished >= n:
            return Snapshot("finalizing", finished, now, None, started, final)
        return Snapshot("in_progress", finished, now, None, started, final)

    # --- items ----------------------------------------------------------------------------------

    def errored_among(self, finished: int) -> int:
        """How many of the first ``finished`` items to end were errored."""
        return bisect.bisect_left(self._errored_ranks, finished)

    def rank(self, index: int) -> int:
        if self._rank is None:
            ranks = array("I", bytes(4 * len(self.order)))
            for rank, i in enumerate(self.order):
                ranks[i] = rank
            self._rank = ranks
        return int(self._rank[index])

    def status(self, index: int, snap: Snapshot) -> ItemStatus:
        """Item ``index``'s status at ``snap`` (every item of a batch that failed errored)."""
        if snap.phase == "failed":
            return "errored"
        if self.rank(index) < snap.finished:
            return "errored" if self.items.outcomes[index].errored else "succeeded"
        if snap.ended_at is None:
            return "processing"
        return "canceled" if snap.phase == "canceled" else "expired"

    def counts(self, snap: Snapshot) -> dict[ItemStatus, int]:
        if snap.phase == "failed":
            n = len(self.items)
            return {"processing": 0, "succeeded": 0, "errored": n, "expired": 0, "canceled": 0}
        errored = self.errored_among(snap.finished)
        rest = len(self.items) - snap.finished
        ended = snap.ended_at is not None
        return {
            "processing": 0 if ended else rest,
            "succeeded": snap.finished - errored,
            "errored": errored,
            "expired": rest if ended and snap.phase == "expired" else 0,
            "canceled": rest if ended and snap.phase == "canceled" else 0,
        }

    def ended_in_order(self, snap: Snapshot) -> Iterator[int]:
        """The indexes of the items that ended with their own outcome, in the order they ended."""
        for rank in range(snap.finished):
            yield int(self.order[rank])

    def unfinished_in_order(self, snap: Snapshot) -> Iterator[int]:
        for rank in range(snap.finished, len(self.order)):
            yield int(self.order[rank])


class MockBatch:
    """A batch the mock server holds, as a test sees it: read at the time of each access.

    ``custom_ids`` are the ids (Anthropic, OpenAI) or keys (Gemini ``metadata.key``, None when
    an inline request had none) in submission order.
    """

    def __init__(self, batch: Batch, store: BatchStore) -> None:
        self._batch = batch
        self._store = store

    @property
    def id(self) -> str:
        """The provider's id (Gemini's is ``batches/...``)."""
        return self._batch.id

    @property
    def provider(self) -> Provider:
        return self._batch.provider

    @property
    def custom_ids(self) -> list[str | None]:
        return list(self._batch.items.ids)

    @property
    def metadata(self) -> dict[str, str]:
        """OpenAI's ``metadata``, Gemini's ``displayName`` (as ``{"displayName": ...}``), or
        nothing for Anthropic (whose batches carry none)."""
        return dict(self._batch.extra.get("metadata") or {})

    @property
    def created_at(self) -> float:
        """The batch clock's reading when it was created (seconds since the epoch)."""
        return self._batch.created

    @property
    def phase(self) -> Phase:
        """Where the batch stands now, in neutral words."""
        return self._store.snapshot(self._batch).phase

    @property
    def cancel_requested(self) -> bool:
        return self._batch.cancel_at is not None

    @property
    def deleted(self) -> bool:
        return self._batch.deleted

    def counts(self) -> dict[ItemStatus, int]:
        """How many items are processing, succeeded, errored, expired, canceled now."""
        return self._batch.counts(self._store.snapshot(self._batch))

    def statuses(self) -> dict[str, ItemStatus]:
        """Each item's status now, by custom id (Gemini items without a key by position, as
        ``"#<index>"``)."""
        snap = self._store.snapshot(self._batch)
        return {
            (cid if cid is not None else f"#{i}"): self._batch.status(i, snap)
            for i, cid in enumerate(self._batch.items.ids)
        }

    def __len__(self) -> int:
        return len(self._batch)

    def __repr__(self) -> str:
        return f"MockBatch({self.id!r}, {self.provider}, {len(self)} items, {self.phase})"


@dataclass(frozen=True)
class BatchCounts:
    """What the mock's batch endpoints have seen, per provider (``anthropic``, ``openai``,
    ``azure``, ``gemini``).

    ``create_requests`` counts every create call received, answered or not (a scripted 429, a
    refused body); ``batches_created`` the batches it stored (a ``lost`` create counts);
    ``items_submitted`` the items in them.
    """

    create_requests: Mapping[str, int]
    batches_created: Mapping[str, int]
    items_submitted: Mapping[str, int]


class BatchStore:
    """Every batch and file of one mock server, on one clock. Thread-safe."""

    def __init__(
        self,
        *,
        duration_s: float = DEFAULT_BATCH_DURATION_S,
        expire_after_s: float | None = None,
        clock: Callable[[], float] | None = None,
        seed: int | None = None,
    ) -> None:
        check_duration(duration_s, expire_after_s)
        self.duration_s = float(duration_s)
        self.expire_after_s = None if expire_after_s is None else float(expire_after_s)
        self._clock = clock or time.time
        self._offset = 0.0
        self.seed = seed
        self.lock = threading.RLock()
        self._batches: dict[str, Batch] = {}
        self.files: dict[str, Any] = {}  # OpenAI's files (see `_files`)
        self._create_requests: Counter[str] = Counter()

    # --- the clock ------------------------------------------------------------------------------

    def now(self) -> float:
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
            raise ValueError(
                f"advance_batches takes a number of seconds (0 or more), got {seconds!r}."
            )
        with self.lock:
            self._offset += float(seconds)

    def snapshot(self, batch: Batch) -> Snapshot:
        with self.lock:
            return batch.snapshot(self.now())

    # --- batches --------------------------------------------------------------------------------

    def count_create(self, provider: Provider) -> None:
        with self.lock:
            self._create_requests[provider] += 1

    def add(self, batch_id: str, provider: Provider, items: Items, **extra: Any) -> Batch:
        items.freeze()
        with self.lock:
            batch = Batch(
                batch_id,
                provider,
                items,
                created=self.now(),
                duration=self.duration_s,
                expire_after=self.expire_after_s,
                seed=self.seed,
                extra=extra,
            )
            self._batches[batch_id] = batch
            return batch

    def get(self, batch_id: str, provider: Provider | tuple[Provider, ...]) -> Batch | None:
        wanted = (provider,) if isinstance(provider, str) else provider
        with self.lock:
            batch = self._batches.get(batch_id)
        if batch is None or batch.deleted or batch.provider not in wanted:
            return None
        return batch

    def newest_first(self, provider: Provider | tuple[Provider, ...]) -> list[Batch]:
        wanted = (provider,) if isinstance(provider, str) else provider
        with self.lock:
            batches = list(self._batches.values())
        return [b for b in reversed(batches) if b.provider in wanted and not b.deleted]

    def cancel(self, batch: Batch) -> Snapshot:
        """Ask ``batch`` to stop; the snapshot after the request (a batch that ended stays so)."""
        with self.lock:
            snap = batch.snapshot(self.now())
            if snap.ended_at is None and batch.cancel_at is None:
                batch.cancel_at = snap.now
                snap = batch.snapshot(snap.now)
            return snap

    def all(self) -> list[Batch]:
        with self.lock:
            return list(self._batches.values())

    def clear(self) -> None:
        with self.lock:
            self._batches.clear()
            self.files.clear()
            self._create_requests.clear()

    def counts(self) -> BatchCounts:
        with self.lock:
            created: Counter[str] = Counter()
            items: Counter[str] = Counter()
            for batch in self._batches.values():
                created[batch.provider] += 1
                items[batch.provider] += len(batch)
            return BatchCounts(dict(self._create_requests), dict(created), dict(items))

    def submitted_ids(self, provider: Provider | None = None) -> Counter[str]:
        seen: Counter[str] = Counter()
        for batch in self.all():
            if provider is None or batch.provider == provider:
                seen.update(cid for cid in batch.items.ids if cid is not None)
        return seen


def check_duration(duration_s: float, expire_after_s: float | None) -> None:
    """Refuse a batch duration or expiry that is not a number of seconds, in one sentence."""
    if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s)) or duration_s < 0:
        raise ValueError(
            f"batch_duration_s must be a number of seconds (0 or more), got {duration_s!r}."
        )
    if expire_after_s is not None and not (
        isinstance(expire_after_s, (int, float))
        and math.isfinite(expire_after_s)
        and expire_after_s > 0
    ):
        raise ValueError(
            f"expire_after_s must be a positive number of seconds, or None, got {expire_after_s!r}."
        )
