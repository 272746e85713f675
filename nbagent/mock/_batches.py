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
- ``MockServer.batch_duration_s`` and ``MockServer.expire_after_s`` may be changed on a running
  server (``shared_server()``, behind ``model="demo"``, included); a batch keeps the values it
  was created with.

OpenAI's ``request_counts`` and Gemini's ``batchStats`` move as items end; Anthropic's
``request_counts`` keep every item under ``processing`` until the batch has ended (its API
reference: "Requests start as processing and move to one of the other statuses only once
processing of the entire batch ends").

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
``ok``. A Gemini item error (and a failed Gemini batch's ``error``) is a ``google.rpc.Status``:
``code`` is the canonical code (3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED, 13 INTERNAL,
14 UNAVAILABLE), not the HTTP status; an OpenAI item error is an error-file line whose
``response`` carries the HTTP status and OpenAI's error body; an Anthropic one is an
``errored`` result with Anthropic's error object. Caps are the providers': Anthropic 100,000
requests or 256 MB (a 400, a 413), OpenAI 50,000 lines (the batch ``failed`` with
``too_many_tasks``) or a 200 MB file, Gemini 20 MB of inline requests (a 400).

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
provider reports them now, and each item's request body as it was received),
``MockServer.clear_batches()``.

Batches and their files are kept in memory, compactly: each item's request as one JSON line in
a batch-wide buffer, its fault, and an offset; answers are made when the results are read and
streamed out, never held.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ._batch_timeline import Batch, Items, ItemStatus, Phase, Provider, Snapshot, StoredFile

DEFAULT_BATCH_DURATION_S = 2.0
T = TypeVar("T")


class MockBatch:
    """A batch the mock server holds, as a test sees it: read at the time of each access.

    ``custom_ids`` are the ids (Anthropic, OpenAI) or keys (Gemini ``metadata.key``, None when
    an inline request had none) in submission order.

    Args:
        batch: The batch as the store keeps it.
        store: The store it lives in (its clock says where the batch stands).
    """

    def __init__(self, batch: Batch, store: BatchStore) -> None:
        self._batch = batch
        self._store = store
        self.id = batch.id
        """The provider's id (Gemini's is ``batches/...``)."""
        self.provider = batch.provider
        """``anthropic``, ``openai``, ``azure`` or ``gemini``: the API it was created through."""
        self.custom_ids = list(batch.items.ids)
        """The items' custom ids (Gemini: ``metadata.key``), in submission order."""
        self.metadata = dict(batch.extra.get("metadata") or {})
        """OpenAI's ``metadata``, Gemini's ``displayName`` (as ``{"displayName": ...}``), or
        nothing for Anthropic (whose batches carry none)."""
        self.created_at = batch.created
        """The batch clock's reading when it was created (seconds since the epoch)."""

    @property
    def phase(self) -> Phase:
        """Where the batch stands now, in neutral words."""
        return self._store.snapshot(self._batch).phase

    @property
    def cancel_requested(self) -> bool:
        """Whether a cancel was asked for (it may not have settled yet)."""
        return self._batch.cancel_at is not None

    @property
    def deleted(self) -> bool:
        """Whether it was deleted (it is then gone from the provider's endpoints)."""
        return self._batch.deleted

    def counts(self) -> dict[ItemStatus, int]:
        """How many items stand where, now.

        Returns:
            The number of items ``processing``, ``succeeded``, ``errored``, ``expired`` and
            ``canceled`` (an item of a batch that failed counts as errored).
        """
        return self._batch.counts(self._store.snapshot(self._batch))

    def statuses(self) -> dict[str, ItemStatus]:
        """Each item's status now.

        Returns:
            The status by custom id (a Gemini item without a key by position, as
            ``"#<index>"``), in submission order.
        """
        snap = self._store.snapshot(self._batch)
        return self._by_id(lambda i: self._batch.status(i, snap))

    def requests(self) -> dict[str, Any]:
        """Each item's request body as the batch received it: Anthropic's `params`, the
        `body` of an OpenAI line, Gemini's inline `request`.

        Returns:
            The body by custom id (a Gemini item without a key by position, as
            ``"#<index>"``), in submission order.
        """
        return self._by_id(self._batch.request)

    def _by_id(self, value: Callable[[int], T]) -> dict[str, T]:
        """``value`` of each item by its custom id (a Gemini item without a key by position)."""
        ids = self._batch.items.ids
        return {(cid if cid is not None else f"#{i}"): value(i) for i, cid in enumerate(ids)}

    def __len__(self) -> int:
        return len(self._batch)

    def __repr__(self) -> str:
        return f"MockBatch({self.id!r}, {self.provider}, {len(self)} items, {self.phase})"


@dataclass(frozen=True)
class BatchCounts:
    """What the mock's batch endpoints have seen, per provider (``anthropic``, ``openai``,
    ``azure``, ``gemini``).

    Attributes:
        create_requests: Every create call received, answered or not (a scripted 429, a refused
            body), by provider.
        batches_created: The batches stored, by provider (a ``lost`` create counts: the provider
            accepted it).
        items_submitted: The items in those batches, by provider.
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
        self.duration_s = _seconds(duration_s, DURATION)
        self.expire_after_s = _expiry(expire_after_s)
        self._clock = clock or time.time
        self.offset = 0.0  # how far `MockServer.advance_batches` moved the clock
        self.seed = seed
        self.lock = threading.RLock()
        self.batches: dict[str, Batch] = {}  # oldest first
        self.files: dict[str, StoredFile] = {}  # OpenAI's files
        self.create_requests: Counter[str] = Counter()

    # --- the clock ------------------------------------------------------------------------------

    def now(self) -> float:
        return self._clock() + self.offset

    def snapshot(self, batch: Batch) -> Snapshot:
        with self.lock:
            return batch.snapshot(self.now())

    # --- batches --------------------------------------------------------------------------------

    def count_create(self, provider: Provider) -> None:
        with self.lock:
            self.create_requests[provider] += 1

    def add(self, batch_id: str, provider: Provider, items: Items, **fields: Any) -> Batch:
        """Keep a new batch (``fields``: the rest of `Batch`'s)."""
        with self.lock:
            batch = Batch(
                batch_id,
                provider,
                items,
                created=self.now(),
                duration=self.duration_s,
                expire_after=self.expire_after_s,
                seed=self.seed,
                ordinal=len(self.batches),
                **fields,
            )
            self.batches[batch_id] = batch
            return batch

    def get(self, batch_id: str, provider: Provider) -> Batch | None:
        with self.lock:
            batch = self.batches.get(batch_id)
        if batch is None or batch.deleted or batch.provider != provider:
            return None
        return batch

    def held(self, provider: Provider | None = None) -> list[Batch]:
        """Its batches, oldest first, deleted ones included (``provider``: that API's only)."""
        with self.lock:
            return [b for b in self.batches.values() if provider in (None, b.provider)]


DURATION = "batch_duration_s must be a number of seconds (0 or more)"
EXPIRY = "expire_after_s must be a positive number of seconds, or None"


def _seconds(value: Any, refusal: str, positive: bool = False) -> float:
    """``value`` as a number of seconds (0 or more; ``positive``: more than 0), or a ValueError
    that says ``refusal`` of it, in one sentence."""
    number = isinstance(value, (int, float)) and math.isfinite(value)
    if not number or value < 0 or (positive and value == 0):
        raise ValueError(f"{refusal}, got {value!r}.")
    return float(value)


def _expiry(value: Any) -> float | None:
    return None if value is None else _seconds(value, EXPIRY, positive=True)


class BatchViews:
    """What `MockServer` says about, and does to, the provider batches it holds."""

    batch_store: BatchStore

    @property
    def batch_duration_s(self) -> float:
        """How long a batch created from now on runs, on the batch clock."""
        return self.batch_store.duration_s

    @batch_duration_s.setter
    def batch_duration_s(self, seconds: float) -> None:
        self.batch_store.duration_s = _seconds(seconds, DURATION)

    @property
    def expire_after_s(self) -> float | None:
        """After how long a batch created from now on expires (None: it does not)."""
        return self.batch_store.expire_after_s

    @expire_after_s.setter
    def expire_after_s(self, seconds: float | None) -> None:
        self.batch_store.expire_after_s = _expiry(seconds)

    def advance_batches(self, seconds: float) -> None:
        """Move the batch clock forward, so batches progress without anyone waiting.

        Args:
            seconds: how far (0 or more).

        Raises:
            ValueError: ``seconds`` is negative or not a number.
        """
        how_far = _seconds(seconds, "advance_batches takes a number of seconds (0 or more)")
        with self.batch_store.lock:
            self.batch_store.offset += how_far

    @property
    def batch_counts(self) -> BatchCounts:
        """Create requests received, batches created and items submitted, per provider."""
        items: Counter[str] = Counter()
        with self.batch_store.lock:
            batches = self.batch_store.held()
            for batch in batches:
                items[batch.provider] += len(batch)
            created = Counter[str](batch.provider for batch in batches)
            return BatchCounts(dict(self.batch_store.create_requests), dict(created), dict(items))

    @property
    def batches(self) -> list[MockBatch]:
        """Every batch created since the start (or `clear_batches`), oldest first, deleted
        ones included."""
        return [MockBatch(b, self.batch_store) for b in self.batch_store.held()]

    def batch(self, batch_id: str) -> MockBatch:
        """The batch with this id (Gemini's as ``batches/...``).

        Args:
            batch_id: the id the create answered with.

        Returns:
            A live view of the batch.

        Raises:
            KeyError: no batch has that id.
        """
        found = self.batch_store.batches.get(batch_id)
        if found is None:
            raise KeyError(f"The mock server holds no batch {batch_id!r}.")
        return MockBatch(found, self.batch_store)

    def submitted_ids(self, provider: Provider | None = None) -> Counter[str]:
        """How many times each custom id (Gemini: ``metadata.key``) was submitted in a batch.

        Args:
            provider: ``anthropic``, ``openai``, ``azure`` or ``gemini``; None for all.

        Returns:
            A `collections.Counter`: an id submitted twice counts 2.
        """
        batches = self.batch_store.held(provider)
        return Counter(cid for batch in batches for cid in batch.items.ids if cid is not None)

    def clear_batches(self) -> None:
        """Forget every batch, file and batch counter."""
        store = self.batch_store
        with store.lock:
            store.batches.clear()
            store.files.clear()
            store.create_requests.clear()
