"""Gemini's batch mode on the mock server, with inline requests.

The shapes are python-genai's ``google/genai/batches.py`` (``_BatchJob_from_mldev``,
``_InlinedResponse_from_mldev``) and the API reference (ai.google.dev/api/batch-mode): a create
answers a long-running operation named ``batches/...`` whose ``metadata`` is the batch
(``@type`` ``...GenerateContentBatch``, ``model``, ``displayName``, ``createTime``,
``updateTime``, ``endTime``, ``batchStats`` with its counts as strings and zero counts left out,
``state`` ``BATCH_STATE_*``, ``name``). Once it has succeeded the operation is ``done`` and the
inline responses, in input order, each a ``response`` or an ``error`` with the request's
``metadata``, are under both ``metadata.output.inlinedResponses.inlinedResponses`` (what the SDK
reads) and ``response.inlinedResponses.inlinedResponses`` (what the REST guide reads). A batch
that expires (Gemini: still pending or running after 48 hours) or is cancelled carries no
responses. An item error, like a failed batch's ``error``, is a ``google.rpc.Status``: ``code``
(the canonical ``google.rpc.Code``, 8 for RESOURCE_EXHAUSTED, not the HTTP status) and
``message``; ``details`` are left out, since the genai SDK types them as strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import partial
from typing import Any

from . import _batch_items as item
from ._batch_api import BatchAPI, Paging
from ._batch_timeline import EVERY, Batch, Snapshot
from ._call import Call
from ._codec import Route
from ._fault_answers import reply_stream
from ._ratelimit import rfc3339
from ._request_parsers import _dicts, _require_dict

MAX_INLINE_BYTES = 20 * 1024 * 1024
BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"
# google.rpc.Code: a Status inside an operation or an inline response carries the canonical
# code (its place in this list), not the HTTP status (the HTTP error envelope carries both).
_CODE_NAMES = (
    "OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS "
    "PERMISSION_DENIED RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE "
    "UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED"
)
RPC_CODES = {name: code for code, name in enumerate(_CODE_NAMES.split())}
_HOLE = "\u0000{}\u0000"  # where the inline responses of the batch it names go
_HOLES = re.compile(rb'"\\u0000([^"\\]+)\\u0000"')


def operation(call: Call, batch: Batch, snap: Snapshot) -> dict[str, Any]:
    """The batch as Gemini answers it, with a hole where the inline responses go."""
    ended, succeeded = snap.ended_at is not None, snap.phase == "completed"
    responses = {"inlinedResponses": _HOLE.format(batch.id)}
    meta: dict[str, Any] = {
        "@type": BATCH_TYPE,
        "model": "models/" + batch.route.model,
        "displayName": batch.extra["metadata"].get("displayName", ""),
        **({"output": {"inlinedResponses": responses}} if succeeded else {}),
        "createTime": API.time(batch.created),
        "updateTime": API.time(snap.ended_at if ended else snap.now),
        **({"endTime": API.time(snap.ended_at)} if ended else {}),
        # int64 counts as strings, the zeros left out
        "batchStats": {k: str(v) for k, v in API.count(batch, snap).items() if v},
        "state": API.status[snap.phase],
        "name": batch.id,
    }
    op: dict[str, Any] = {"name": batch.id, "metadata": meta}
    if ended:
        op["done"] = True
    if succeeded:
        op["response"] = {"@type": OUTPUT_TYPE, "inlinedResponses": responses}
    if snap.phase == "failed":
        op["error"] = batch.failed[0]
    return op


def _send(call: Call, doc: dict[str, Any]) -> None:
    """Stream the JSON of ``doc`` (operations), each inline response written where the hole of
    its batch is."""
    parts = _HOLES.split(json.dumps(doc, ensure_ascii=False).encode())
    holes = [call.store.batches[batch_id.decode()] for batch_id in parts[1::2]]

    def pieces() -> Iterator[bytes]:
        yield parts[0]
        for batch, part in zip(holes, parts[2::2], strict=True):
            yield b"["
            for index in range(len(batch)):
                yield (b"," if index else b"") + _response(call, batch, index)
            yield b"]" + part

    count = 1 + sum(len(batch) + 2 for batch in holes)
    reply_stream(call, pieces(), "application/json; charset=UTF-8", count)


def _response(call: Call, batch: Batch, index: int) -> bytes:
    entry = json.loads(batch.items.line(index))
    status, body = item.result(call, batch, index, entry)
    out: dict[str, Any] = {"response": body} if status == 200 else {"error": rpc_status(body)}
    if entry.get("metadata") is not None:
        out["metadata"] = entry["metadata"]
    return item.compact(out)


def rpc_status(body: dict[str, Any]) -> dict[str, Any]:
    """An HTTP error body as the ``google.rpc.Status`` an operation carries."""
    error = body.get("error", {})
    code = RPC_CODES.get(str(error.get("status", "")), 2)
    return {"code": code, "message": str(error.get("message", ""))}


# --- endpoints ----------------------------------------------------------------------------------


def create(call: Call) -> None:
    batch_spec = _require_dict(_require_dict(call.json_body(), "body").get("batch"), "batch")
    config = _require_dict(batch_spec.get("inputConfig"), "batch.inputConfig")
    if config.get("fileName") is not None:
        call.refuse(
            400,
            "The mock server emulates batches of inline requests only, not batches from a file.",
        )
    holder = config.get("requests")
    requests = holder.get("requests") if isinstance(holder, dict) else None
    if not isinstance(requests, list) or not requests:
        call.refuse(400, "batch.inputConfig.requests.requests must list at least one request.")
    for where, entry in _dicts(requests, "batch.inputConfig.requests.requests", "[{}]"):
        _require_dict(entry.get("request"), f"{where}.request")
        if entry.get("metadata") is not None:
            _require_dict(entry["metadata"], f"{where}.metadata")
    model_id = call.params["model"]
    route = Route("gemini", model=model_id, stream=False)
    entries = (((e.get("metadata") or {}).get("key"), e, e["request"]) for e in requests)
    items = item.items_of(call, route, entries)
    display = batch_spec.get("displayName")
    API.add(
        call,
        items,
        {"displayName": display, "requests": len(items)},
        route,
        extra={"metadata": {"displayName": display} if isinstance(display, str) else {}},
        failed=[_failure(model_id)] if call.fault.kind == "failed" else [],
    )


def _failure(model_id: str) -> dict[str, Any]:
    message = (
        f"Batch job failed: the enqueued token limit for {model_id} was reached. "
        "Try again once some running batches have finished."
    )
    return {"code": RPC_CODES["RESOURCE_EXHAUSTED"], "message": message}


def _listing(operations: list[dict[str, Any]], more: bool) -> dict[str, Any]:
    return {"operations": operations, **({"nextPageToken": operations[-1]["name"]} if more else {})}


API = BatchAPI(
    format="gemini",
    status={
        "validating": "BATCH_STATE_PENDING",
        "in_progress": "BATCH_STATE_RUNNING",
        "finalizing": "BATCH_STATE_RUNNING",
        "canceling": "BATCH_STATE_RUNNING",
        "completed": "BATCH_STATE_SUCCEEDED",
        "expired": "BATCH_STATE_EXPIRED",
        "canceled": "BATCH_STATE_CANCELLED",
        "failed": "BATCH_STATE_FAILED",
    },
    counts={
        "requestCount": EVERY,
        "successfulRequestCount": ("succeeded",),
        "failedRequestCount": ("errored", "expired", "canceled"),
        "pendingRequestCount": ("processing",),
    },
    paging=Paging("pageSize", 20, 1000, "pageToken"),
    id_style=("batches/", 36, "abcdefghijklmnopqrstuvwxyz0123456789"),
    not_found="Batch {} not found.",
    body=operation,
    listing=_listing,
    send=_send,
    stamp=partial(rfc3339, nanos=True),
    cancel_path=":cancel",
    cancel_empty=True,
    keeps_partial=False,  # an expired or cancelled batch carries no responses
    request_key="request",
    path_id="batches/{}".format,
)


def _shared_v1(call: Call) -> bool:
    """Whether a request to ``/v1/batches...``, OpenAI's paths too, is Gemini's: it carries
    Gemini's key (header or ``?key=``) or paging parameters, or names a Gemini batch."""
    if not call.bare.startswith("/v1/batches"):
        return True
    if "x-goog-api-key" in call.headers or call.query.keys() & {"key", "pageSize", "pageToken"}:
        return True
    batch_id = call.params.get("id")
    return batch_id is not None and call.store.get("batches/" + batch_id, "gemini") is not None


ENDPOINTS = API.rows(
    "gemini",
    "/(?:v1beta|v1alpha|v1)",
    [("POST", "/models/(?P<model>[^/:]+):batchGenerateContent", "create", create)],
    when=_shared_v1,
    create=MAX_INLINE_BYTES,
)
