"""Gemini's batch mode (`models/{model}:batchGenerateContent`, `batches/{id}`), inline requests.

Wire facts (python-genai `google/genai/batches.py` and `_transformers.py`; ai.google.dev
`api/batch-api` and `gemini-api/docs/batch-api`): `POST {base}/v1beta/models/{m}:
batchGenerateContent` with `{batch: {displayName, inputConfig: {requests: {requests: [{request,
metadata: {key}}]}}}}` (inline, under 20 MB) answers an Operation `{name: "batches/…",
metadata: {…the batch…}}`; `GET {base}/v1beta/batches/{id}`; `GET {base}/v1beta/batches
?pageSize=&pageToken=` (`operations`, `nextPageToken`); `POST …/batches/{id}:cancel`. The batch's
`state` is `BATCH_STATE_PENDING`, `_RUNNING`, `_SUCCEEDED`, `_FAILED`, `_CANCELLED` or
`_EXPIRED` on the wire (the SDK shows `JOB_STATE_*`; both are read), `batchStats {requestCount,
successfulRequestCount, failedRequestCount, pendingRequestCount}` (int64 as strings), and once
done its `output`: `inlinedResponses.inlinedResponses`, each a `response`
(`GenerateContentResponse`) or an `error` (`google.rpc.Status`) with the request's `metadata`
(the SDK reads `metadata.output`, the REST docs `response`: both are read), or a
`responsesFile` of JSON lines `{key, response | error}`. A job still pending after 48 h expires.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from ..errors import ProviderError
from ._batch_client import BatchClient, Items
from ._batch_wire import BatchCaps, BatchStatus, Ending, ItemResult, Phase, counts_of
from ._parts import json_object, whole_number
from ._server_wish import rfc3339

STATUS: dict[str, Phase] = {
    "BATCH_STATE_UNSPECIFIED": "running",
    "BATCH_STATE_PENDING": "running",
    "BATCH_STATE_RUNNING": "running",
    "BATCH_STATE_SUCCEEDED": "ended",
    "BATCH_STATE_FAILED": "ended",
    "BATCH_STATE_CANCELLED": "ended",
    "BATCH_STATE_EXPIRED": "ended",
}
"""Gemini's batch states (on the wire), as nbagent reads them; `JOB_STATE_*` (the SDK's
names) are read as the same."""

_ENDINGS: dict[str, Ending] = {
    "BATCH_STATE_EXPIRED": "expired",
    "BATCH_STATE_CANCELLED": "canceled",
}
GRPC_CODES: dict[int, tuple[int, str]] = {
    1: (499, "CANCELLED"),
    2: (500, "UNKNOWN"),
    3: (400, "INVALID_ARGUMENT"),
    4: (504, "DEADLINE_EXCEEDED"),
    5: (404, "NOT_FOUND"),
    6: (409, "ALREADY_EXISTS"),
    7: (403, "PERMISSION_DENIED"),
    8: (429, "RESOURCE_EXHAUSTED"),
    9: (400, "FAILED_PRECONDITION"),
    10: (409, "ABORTED"),
    11: (400, "OUT_OF_RANGE"),
    12: (501, "UNIMPLEMENTED"),
    13: (500, "INTERNAL"),
    14: (503, "UNAVAILABLE"),
    15: (500, "DATA_LOSS"),
    16: (401, "UNAUTHENTICATED"),
}
"""An item's (or a batch's) `google.rpc.Status` carries the canonical gRPC code, not an HTTP
status: the HTTP status and status name that code maps to (google.rpc `code.proto`), so the
error is classified as the same failure answered over HTTP would be."""

MAX_RESULTS_BYTES = 1024 * 1024 * 1024
"""Inline results arrive in the batch's own document: it may be read up to this size."""


class GeminiBatches(BatchClient):
    """Gemini batch mode with inline requests."""

    label = "Gemini batch mode"
    default_caps = BatchCaps(1_000_000, 20 * 1024 * 1024)

    def item(self, custom_id: str, body: dict[str, Any]) -> bytes:
        return self.provider.encode({"request": body, "metadata": {"key": custom_id}})

    def batch_url(self, batch_id: str) -> str:
        name = batch_id if batch_id.startswith("batches/") else f"batches/{batch_id}"
        return self.provider.api_url(name)

    async def create(self, items: Items, *, count: int, size: int, tag: str) -> BatchStatus:
        tagged = json.dumps({"displayName": tag})[:-1].encode()  # '{"displayName": "…"'
        head = b'{"batch":' + tagged + b',"inputConfig":{"requests":{"requests":['
        model = self.provider.model.removeprefix("models/")  # GeminiProvider.model_id
        url = self.provider.api_url(f"models/{model}:batchGenerateContent")
        doc = await self.post_items(url, items, head=head, tail=b"]}}}}", count=count, size=size)
        return self.status(doc)

    async def cancel(self, batch_id: str) -> BatchStatus:
        await self.provider.read_json("POST", f"{self.batch_url(batch_id)}:cancel")
        return await self.retrieve(batch_id)

    async def recent(self, since: float) -> list[BatchStatus]:
        url = self.provider.api_url("batches")
        return await self.listed(url, "pageToken", since, size="pageSize")

    def _page(self, doc: dict[str, Any]) -> Any:
        return doc.get("operations") or doc.get("batches") or []

    def _next_page(self, doc: dict[str, Any], page: list[BatchStatus]) -> str | None:
        token = doc.get("nextPageToken")
        return token if isinstance(token, str) else None

    def status(self, doc: dict[str, Any], *, retry_after: float | None = None) -> BatchStatus:
        meta = json_object(doc, "metadata") or doc  # an operation's, or a listed batch itself
        word = str(meta.get("state") or "BATCH_STATE_UNSPECIFIED")
        wire_word = word.replace("JOB_STATE_", "BATCH_STATE_")
        phase: Phase = STATUS.get(wire_word, "running")
        if doc.get("done") is True and phase == "running" and wire_word in STATUS:
            phase = "ended"
        stats = json_object(meta, "batchStats")
        total = whole_number(stats.get("requestCount")) or 0
        ok = whole_number(stats.get("successfulRequestCount")) or 0
        bad = whole_number(stats.get("failedRequestCount")) or 0
        pending = whole_number(stats.get("pendingRequestCount")) or max(0, total - ok - bad)
        ending = _ENDINGS.get(wire_word) if phase == "ended" else None
        counts = counts_of(ok, bad, pending, ending)
        error = doc.get("error")
        failure = None
        if wire_word == "BATCH_STATE_FAILED":
            failure = str(error.get("message")) if isinstance(error, dict) else "the batch failed"
        return self.made(
            doc,
            doc.get("name") or meta.get("name"),
            word,
            phase,
            counts=counts,
            created_at=rfc3339(meta.get("createTime")),
            tag=meta.get("displayName"),
            failure=failure,
            ending=ending,
            retry_after=retry_after,
        )

    def failure_error(self, status: BatchStatus) -> ProviderError:
        error = status.doc.get("error")
        error = error if isinstance(error, dict) else {"message": status.failure}
        return self.rpc_error(error)

    def rpc_error(self, error: dict[str, Any]) -> ProviderError:
        """The typed error of a `google.rpc.Status` (gRPC code) or an HTTP-style error."""
        code = error.get("code")
        http, name = 500, "INTERNAL"
        if isinstance(code, int) and code in GRPC_CODES:
            http, name = GRPC_CODES[code]
        elif isinstance(code, int) and 400 <= code < 600:
            http, name = code, str(error.get("status") or "")
        body = {**error, "code": http, "status": error.get("status") or name}
        return self.provider.http_error(http, {"error": body})

    async def results(self, status: BatchStatus) -> AsyncGenerator[ItemResult, None]:
        if status.failure is not None:
            return
        doc = status.doc
        if not _output(doc):  # a status from a list: read the batch itself
            url = self.batch_url(status.id)
            doc, _ = await self.provider.read_json("GET", url, max_bytes=MAX_RESULTS_BYTES)
        output = _output(doc)
        responses = json_object(output, "inlinedResponses").get("inlinedResponses")
        for entry in responses if isinstance(responses, list) else ():
            if isinstance(entry, dict):
                key = json_object(entry, "metadata").get("key")
                yield self._item(str(key or ""), entry)
        file_name = output.get("responsesFile")
        if isinstance(file_name, str) and file_name:
            root, version = self.provider.api_base.rsplit("/", 1)  # under /v1beta: /download/v1beta
            url = f"{root}/download/{version}/{file_name}:download?alt=media"
            async for line in self.lines(url):
                yield self._item(str(line.get("key") or ""), line)

    def _item(self, key: str, entry: dict[str, Any]) -> ItemResult:
        if isinstance(entry.get("response"), dict):
            return ItemResult(key, "succeeded", body=entry["response"])
        error = entry.get("error")
        error = error if isinstance(error, dict) else {"message": "no response"}
        return ItemResult(key, "errored", error=self.rpc_error(error))


def _output(doc: dict[str, Any]) -> dict[str, Any]:
    """Where a done batch's results are: the Operation's `response` (REST docs), the batch's
    `output` under `metadata` (what the SDK reads), or `output` of a bare batch."""
    for holder in (
        doc.get("response"),
        json_object(doc, "metadata").get("output"),
        doc.get("output"),
    ):
        if isinstance(holder, dict) and ("inlinedResponses" in holder or "responsesFile" in holder):
            return holder
    return {}
