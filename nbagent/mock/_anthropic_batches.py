"""Anthropic's Message Batches API on the mock server.

The shapes are those of anthropic-sdk-python's ``types/messages/message_batch*.py`` and the API
reference (platform.claude.com/docs/en/api/creating-message-batches and its siblings): a batch
is ``processing_status`` ``in_progress`` / ``canceling`` / ``ended`` (one l); its
``request_counts`` keep every item under ``processing`` until the whole batch has ended, as the
reference says; its results are JSON lines at ``results_url`` (here on the mock's own host, the
address the client used), not in request order. An errored item carries the error body a live
request would have had; an item the quota fault breaks carries the invalid-request error
"Your credit balance is too low ..." that Anthropic answers when the credit runs out.
"""

from __future__ import annotations

import re
from typing import Any

from . import _batch_items as item
from ._batch_api import ONE, BatchAPI, Paging, list_body
from ._batch_timeline import ALNUM, Batch, Snapshot
from ._call import Call
from ._codec import Route
from ._fault_answers import reply_stream
from ._ratelimit import rfc3339
from ._request_parsers import _dicts, _require_dict

MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
CREDIT = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
_PROCESSING = "Message batch {} is still processing; "


def batch_json(call: Call, batch: Batch, snap: Snapshot) -> dict[str, Any]:
    ended = snap.ended_at is not None
    results = f"{call.base_url()}/v1/messages/batches/{batch.id}/results"
    # "Requests start as processing and move to one of the other statuses only once
    # processing of the entire batch ends" (the API reference).
    processing = {**dict.fromkeys(API.counts, 0), "processing": len(batch)}
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": API.status[snap.phase],
        "request_counts": API.count(batch, snap) if ended else processing,
        "ended_at": API.time(snap.ended_at),
        "created_at": API.time(batch.created),
        "expires_at": API.expires(batch),
        "archived_at": None,
        "cancel_initiated_at": API.time(batch.cancel_at),
        "results_url": results if ended else None,
    }


API = BatchAPI(
    format="anthropic",
    status={
        "validating": "in_progress",
        "in_progress": "in_progress",
        "finalizing": "in_progress",
        "canceling": "canceling",
        "completed": "ended",
        "expired": "ended",
        "canceled": "ended",
    },
    counts={s: (s,) for s in ("processing", "succeeded", "errored", "canceled", "expired")},
    paging=Paging("limit", 20, 1000, "after_id", "before_id"),
    id_style=("msgbatch_01", 22, ALNUM),
    not_found="message_batch_id: no message batch found with id '{}'.",
    body=batch_json,
    listing=list_body,
    stamp=rfc3339,
    path="",
    deleted_type="message_batch_deleted",
    must_end=_PROCESSING + "cancel it and wait for it to end before deleting it.",
)


# --- endpoints ----------------------------------------------------------------------------------


def create(call: Call) -> None:
    body = call.json_body()
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        call.refuse(400, "requests: Field required: a list of 1 to 100000 requests.", "requests")
    if len(requests) > MAX_REQUESTS:
        most = f"at most {MAX_REQUESTS} items after validation, not {len(requests)}"
        call.refuse(400, f"requests: List should have {most}.", "requests")
    seen: set[str] = set()
    for where, entry in _dicts(requests, "requests"):
        custom_id = entry.get("custom_id")
        if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
            message = f"{where}.custom_id: String should match pattern '{_CUSTOM_ID.pattern}'."
            call.refuse(400, message, f"{where}.custom_id")
        if custom_id in seen:
            call.refuse(400, f"Duplicate custom_id in requests: {custom_id!r}.", where)
        seen.add(custom_id)
        _require_dict(entry.get("params"), f"{where}.params")
    # a batch that fails (create:failed) errs in every item: Anthropic has no failed batch
    entries = ((r["custom_id"], r["params"], r["params"]) for r in requests)
    items = item.items_of(call, Route("anthropic"), entries)
    del requests, body, entries
    API.add(call, items, {"requests": len(items)})


def results(call: Call) -> None:
    batch = API.find(call)
    snap = API.ended(
        call, batch, _PROCESSING + "its results are ready once its processing_status is ended."
    )
    rest = {"type": batch.unfinished(snap)}
    lines = batch.lines(
        snap, lambda i: _line(batch, i, _result(call, batch, i)), lambda i: _line(batch, i, rest)
    )
    reply_stream(call, lines, "application/x-jsonl", len(batch))


def _result(call: Call, batch: Batch, index: int) -> dict[str, Any]:
    """An item that ended with its own outcome, as its results line says."""
    outcome = batch.items.outcomes[index]
    _, body = item.result(call, batch, index)
    if not outcome.errored:
        return {"type": "succeeded", "message": body}
    error = body["error"]
    if outcome.kind == "fault" and outcome.fault.kind == "quota":
        error = {"type": "invalid_request_error", "message": CREDIT}
    return {"type": "errored", "error": {"type": "error", "error": error}}


def _line(batch: Batch, index: int, result: dict[str, Any]) -> bytes:
    return item.compact({"custom_id": batch.items.ids[index], "result": result}) + b"\n"


ENDPOINTS = API.rows(
    "anthropic",
    "/v1/messages/batches",
    [("POST", "/?", "create", create), ("GET", ONE + "/results/?", "results", results)],
    create=MAX_BYTES + 65536,
)
