"""A provider's batch API as a declarative spec over the one batch timeline (`_batch_timeline`).

A `BatchAPI` says what differs between Anthropic's Message Batches, OpenAI's Batch API and
Gemini's batch mode: the status word of each phase, the names of the counts (and what each
sums), how a list pages, the id format, the not-found error, and how the batch object is
written, how it writes a moment, where its paths are, and what a cancel and a delete say. The
endpoints they share (retrieve, cancel, list, delete, and their rows of the route table) and
the storing and answering of a new batch are written once here over the spec; a provider module
adds its create (its validation) and its results (`BatchAPI.rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ._batch_timeline import Batch, Items, ItemStatus, Phase, Provider, Snapshot, new_id
from ._call import Call, CallError, Endpoint
from ._codec import Route
from ._conversation import Format
from ._fault_answers import reply

T = TypeVar("T")
DAY_S = 86_400.0


@dataclass(frozen=True)
class Paging:
    """How a list pages: the size parameter (its default and most), the cursor parameters (an
    unknown cursor gives an empty page)."""

    size: str
    default: int
    most: int
    after: str
    before: str | None = None

    def page(
        self, call: Call, objects: Sequence[T], id_of: Callable[[T], str]
    ) -> tuple[list[T], bool]:
        """The page the call asks for, newest first, and whether more follow."""
        limit = call.int_query(self.size, self.default, 1, self.most)
        ids = [id_of(x) for x in objects]
        after = call.query.get(self.after)
        before = call.query.get(self.before) if self.before else None
        if before is not None and after is None:  # the page before ``before``
            end = ids.index(before) if before in ids else 0
            return list(objects[max(0, end - limit) : end]), end - limit > 0
        # the page after ``after`` (an unknown one: after the last), or the first
        start = ids.index(after) + 1 if after in ids else 0 if after is None else len(ids)
        return list(objects[start : start + limit]), start + limit < len(ids)


Row = tuple[str, str, "str | None", Callable[[Call], None]]
"""A route-table row: ``(method, path, fault target, serve)``."""
ONE = "/(?P<id>[^/:]+)"
"""The path of one batch, after `BatchAPI.path` (the id is a path parameter)."""


@dataclass(frozen=True)
class BatchAPI:
    """One provider's batch API.

    Attributes:
        format: The wire format of its errors (and its items, unless the batch says).
        status: The status word of each phase.
        counts: Each count's name and the item statuses it sums.
        paging: How its list pages.
        id_style: Its batch ids: a prefix, then how many characters of which alphabet.
        not_found: What the not-found error for an id it holds no batch for says (``{}``: the
            id).
        not_found_as: The status whose error body a not-found is written as (OpenAI's is its
            invalid-request error, 400), naming ``batch_id`` where the format names a field.
        body: The batch object at a snapshot (what a retrieve answers, and a list lists).
        listing: A list's answer: its page of batch objects, and whether more follow.
        send: Answers a call with a document of batch objects (retrieve's, list's, and so on):
            as JSON, or as Gemini streams its operations.
        stamp: Writes a moment (seconds since the epoch) as the API does.
        path: The path of its batches (under a prefix of `BatchAPI.rows`); one batch is under it.
        cancel_path: The path of a batch's cancel, after the batch's.
        cancel_empty: Whether a cancel answers ``{}`` (Gemini's), not the batch.
        deletes: Whether a batch can be deleted (OpenAI's cannot).
        deleted_type: The ``type`` of what a delete answers (with the ``id``); None: ``{}``.
        must_end: The refusal of a delete before the batch has ended (``{}``: its id); None:
            a batch is deleted whenever asked.
        keeps_partial: Whether an expired or canceled batch keeps the answers it has (Gemini's
            carries none).
        request_key: Where an item's stored line holds its request (None: it is the request).
        path_id: The stored id of the id in a path (Gemini's path drops ``batches/``).
    """

    format: Format
    status: Mapping[Phase, str]
    counts: Mapping[str, tuple[ItemStatus, ...]]
    paging: Paging
    id_style: tuple[str, int, str]
    not_found: str
    body: Callable[[Call, Batch, Snapshot], dict[str, Any]]
    listing: Callable[[list[dict[str, Any]], bool], dict[str, Any]]
    send: Callable[[Call, dict[str, Any]], None] = reply
    not_found_as: int = 404
    stamp: Callable[[float], Any] = int
    path: str = "/batches"
    cancel_path: str = "/cancel/?"
    cancel_empty: bool = False
    deletes: bool = True
    deleted_type: str | None = None
    must_end: str | None = None
    keeps_partial: bool = True
    request_key: str | None = None
    path_id: Callable[[str], str] = str

    def time(self, seconds: float | None) -> Any:
        """A moment as the API writes it (None, a moment yet to come, stays None)."""
        return None if seconds is None else self.stamp(seconds)

    def expires(self, batch: Batch) -> Any:
        """When the batch expires, as written: its own expiry, else a day after its creation
        (Anthropic's and OpenAI's window)."""
        after = batch.expire_after if batch.expire_after is not None else DAY_S
        return self.stamp(batch.created + after)

    def count(self, batch: Batch, snap: Snapshot) -> dict[str, int]:
        """The counts by their names, now."""
        now = batch.counts(snap)
        return {name: sum(now[s] for s in statuses) for name, statuses in self.counts.items()}

    def find(self, call: Call) -> Batch:
        """The batch the path names (a 404 in the API's words when there is none)."""
        batch_id = str(self.path_id(call.params["id"]))
        batch = call.store.get(batch_id, call.api)
        if batch is None:
            message = self.not_found.format(batch_id)
            error = call.codec.error_body(self.not_found_as, message, call.request_id, "batch_id")
            raise CallError(404, error)
        return batch

    def ended(self, call: Call, batch: Batch, refusal: str) -> Snapshot:
        """The batch now, once it has ended; before, a 400 that says ``refusal`` (of its id)."""
        snap = call.store.snapshot(batch)
        if snap.ended_at is None:
            call.refuse(400, refusal.format(batch.id))
        return snap

    def respond(self, call: Call, batch: Batch, snap: Snapshot | None = None) -> None:
        """Answer with the batch at ``snap`` (None: now)."""
        snap = call.store.snapshot(batch) if snap is None else snap
        self.send(call, self.body(call, batch, snap))

    def add(
        self, call: Call, items: Items, record: Any, route: Route | None = None, **fields: Any
    ) -> None:
        """Keep a new batch of ``items`` in ``route``'s wire format (None: the API's), with
        ``fields`` of `Batch` (``extra``, ``failed``), and answer with it; ``record`` is what the
        request record keeps as the body."""
        keep = dict(keeps_partial=self.keeps_partial, request_key=self.request_key, **fields)
        route = route or Route(self.format)
        batch = call.store.add(new_id(*self.id_style), call.api, items, route=route, **keep)
        call.body = record
        self.respond(call, batch)

    def retrieve(self, call: Call) -> None:
        self.respond(call, self.find(call))

    def cancel(self, call: Call) -> None:
        batch = self.find(call)
        with call.store.lock:  # a batch that ended, or was asked already, stays as it is
            snap = call.store.snapshot(batch)
            if snap.ended_at is None and batch.cancel_at is None:
                batch.cancel_at = snap.now
                snap = batch.snapshot(snap.now)
        if self.cancel_empty:
            reply(call, {})
        else:
            self.respond(call, batch, snap)

    def delete(self, call: Call) -> None:
        batch = self.find(call)
        if self.must_end is not None:
            self.ended(call, batch, self.must_end)
        batch.deleted = True
        reply(call, {"id": batch.id, "type": self.deleted_type} if self.deleted_type else {})

    def list_batches(self, call: Call) -> None:
        """The page of batch objects a list call asks for, newest first."""
        held = [b for b in reversed(call.store.held(call.api)) if not b.deleted]
        batches, more = self.paging.page(call, held, lambda b: b.id)
        data = [self.body(call, b, call.store.snapshot(b)) for b in batches]
        self.send(call, self.listing(data, more))

    def rows(
        self,
        provider: Provider,
        prefix: str,
        own: Sequence[Row],
        when: Callable[[Call], bool] | None = None,
        **sizes: int,
    ) -> list[Endpoint]:
        """Route-table rows under ``prefix``: the API's ``own`` (its create, its results), then
        the list, cancel, retrieve and delete the spec answers; ``sizes`` gives the largest body
        by target (else 1 MiB), ``when`` a further test of each call."""
        one = self.path + ONE
        table = [
            *own,
            ("GET", self.path + "/?", "list", self.list_batches),
            ("POST", one + self.cancel_path, "cancel", self.cancel),
            ("GET", one + "/?", "retrieve", self.retrieve),
        ]
        if self.deletes:
            table.append(("DELETE", one + "/?", "delete", self.delete))
        return [
            Endpoint(
                method,
                prefix + path,
                serve,
                self.format,
                provider,
                target,
                sizes.get(target or "", 1024 * 1024),
                when=when,
            )
            for method, path, target, serve in table
        ]


def list_body(data: list[dict[str, Any]], more: bool, **extra: Any) -> dict[str, Any]:
    """A page as Anthropic and OpenAI answer it (``extra`` besides: OpenAI's ``object``)."""
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return {**extra, "data": data, "first_id": first, "last_id": last, "has_more": more}
