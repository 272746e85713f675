"""OpenAI's Batch API (`/v1/files` + `/v1/batches`), and Azure OpenAI's (a Global-Batch
deployment).

Wire facts (openai-python `resources/batches.py`, `resources/files.py`, `types/batch.py`,
`types/batch_request_counts.py`): the input is a JSON-lines file uploaded with `POST /v1/files`
(multipart, `purpose=batch`), one line per request `{custom_id, method: "POST", url, body}`; then
`POST /v1/batches` `{input_file_id, endpoint, completion_window: "24h", metadata}` (at most
50,000 requests, 200 MB); `GET /v1/batches/{id}`, `GET /v1/batches?limit=&after=`, `POST
.../{id}/cancel`. `status` is `validating`, `failed`, `in_progress`, `finalizing`,
`completed`, `expired`, `cancelling` or `cancelled` (two l's); `request_counts {total,
completed, failed}`; `output_file_id` and `error_file_id` hold lines `{id, custom_id, response:
{status_code, request_id, body} | null, error: {code, message} | null}` in any order. On expiry
the unfinished lines are in the error file as `batch_expired` while the finished ones stay
(billed) in the output file; a batch whose every line failed can be `completed` with no output
file; too many enqueued tokens is a batch that goes to `failed` with `errors.data[].code
token_limit_exceeded`, not an HTTP error (openai-python#2084).

Azure (learn.microsoft.com, "Getting started with Azure OpenAI global batch deployments"): the
same calls under the resource's endpoint (`/openai/files`, `/openai/batches`, dated with
`api-version` or the v1 paths), lines with `url: /chat/completions` and the deployment as the
body's `model`, the key in `api-key`.
"""

from __future__ import annotations

import secrets as _secrets
from collections.abc import AsyncGenerator
from typing import Any

from ..errors import InvalidResponse, ProviderError, RateLimited
from ._anthropic_batch import expired_error
from ._batch_client import BatchClient, Items
from ._batch_wire import BatchCaps, BatchStatus, Ending, ItemResult, Phase, counts_of
from ._parts import json_object, whole_number

STATUS: dict[str, Phase] = {
    "validating": "running",
    "in_progress": "running",
    "finalizing": "running",
    "cancelling": "canceling",
    "completed": "ended",
    "failed": "ended",
    "expired": "ended",
    "cancelled": "ended",
}
"""OpenAI's (and Azure's) batch `status` words, as nbagent reads them (two l's in
`cancelling` / `cancelled`)."""

_ENDINGS: dict[str, Ending] = {"expired": "expired", "cancelled": "canceled"}
TAG_KEY = "nbagent_tag"
"""The metadata key that carries nbagent's tag on each batch it creates."""
_RATE_CODES = frozenset({"token_limit_exceeded", "rate_limit_exceeded"})


class OpenAIBatches(BatchClient):
    """The Batch API of OpenAI (Chat Completions or Responses items)."""

    label = "OpenAI Batch API"
    default_caps = BatchCaps(50_000, 200 * 1024 * 1024)

    def item(self, custom_id: str, body: dict[str, Any]) -> bytes:
        p = self.provider
        line = {"custom_id": custom_id, "method": "POST", "url": p.batch_endpoint, "body": body}
        return p.encode(line) + b"\n"

    def overhead(self, count: int) -> int:
        return 0  # the file's bytes are the lines (the cap is on the file)

    async def create(self, items: Items, *, count: int, size: int, tag: str) -> BatchStatus:
        boundary = f"nbagent-{_secrets.token_hex(12)}"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{tag}.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n'
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()

        upload = await self.post_items(
            self.provider.api_url("files"),
            items,
            head=head,
            tail=tail,
            count=count,
            size=size,
            sep=b"",  # each line ends in its newline
            content_type=f"multipart/form-data; boundary={boundary}",
        )
        file_id = upload.get("id")
        if not isinstance(file_id, str) or not file_id:
            raise InvalidResponse("the file upload answered without an id", provider=self.name)
        body = {
            "input_file_id": file_id,
            "endpoint": self.provider.batch_endpoint,
            "completion_window": "24h",
            "metadata": {TAG_KEY: tag},
        }
        url = self.provider.api_url("batches")
        doc, _ = await self.provider.read_json("POST", url, json_body=body)
        return self.status(doc)

    def batch_url(self, batch_id: str) -> str:
        return self.provider.api_url(f"batches/{batch_id}")

    async def recent(self, since: float) -> list[BatchStatus]:
        return await self.listed(self.provider.api_url("batches"), "after", since)

    def status(self, doc: dict[str, Any], *, retry_after: float | None = None) -> BatchStatus:
        word = str(doc.get("status") or "")
        phase = STATUS.get(word, "running")
        rc = json_object(doc, "request_counts")
        total = whole_number(rc.get("total")) or 0
        done = whole_number(rc.get("completed")) or 0
        failed = whole_number(rc.get("failed")) or 0
        rest = max(0, total - done - failed)
        ending = _ENDINGS.get(word)
        # an ended batch with no such ending has nothing left to count
        counts = counts_of(done, failed, rest if phase != "ended" or ending else 0, ending)
        meta = doc.get("metadata")
        created = doc.get("created_at")
        return self.made(
            doc,
            doc.get("id"),
            word,
            phase,
            counts=counts,
            created_at=float(created) if isinstance(created, (int, float)) else None,
            tag=meta.get(TAG_KEY) if isinstance(meta, dict) else None,
            failure=_failure(doc) if word == "failed" else None,
            ending=ending,
            retry_after=retry_after,
        )

    async def results(self, status: BatchStatus) -> AsyncGenerator[ItemResult, None]:
        if status.failure is not None:
            return  # nothing ran: the runner gives every item the batch's failure
        for key in ("output_file_id", "error_file_id"):
            file_id = status.doc.get(key)
            if isinstance(file_id, str) and file_id:
                url = self.provider.api_url(f"files/{file_id}/content")
                async for line in self.lines(url):
                    yield self._item(line)

    def failure_error(self, status: BatchStatus) -> ProviderError:
        """The error every item of a batch that failed as a whole gets."""
        code = str(_first_error(status.doc).get("code") or "batch_failed")
        payload = {"error": {"code": code, "message": status.failure or code}}
        if code in _RATE_CODES:  # the provider's queue is full: later, it takes the batch
            return RateLimited(status.failure or code, provider=self.name, code=code)
        return self.provider.http_error(400, payload)

    def _item(self, line: dict[str, Any]) -> ItemResult:
        cid = str(line.get("custom_id") or "")
        response = line.get("response")
        error = line.get("error")
        if isinstance(response, dict):
            code = whole_number(response.get("status_code")) or 0
            rid = (
                response.get("request_id") if isinstance(response.get("request_id"), str) else None
            )
            if 200 <= code < 300:
                return ItemResult(cid, "succeeded", body=response.get("body"), request_id=rid)
            err = self.provider.http_error(code or 500, response.get("body"))
            return ItemResult(cid, "errored", error=err, request_id=rid)
        err_doc = error if isinstance(error, dict) else {}
        word = str(err_doc.get("code") or "")
        message = str(err_doc.get("message") or word or "no response")
        if word == "batch_expired":
            return ItemResult(cid, "expired", error=expired_error(self.name, message))
        if word in ("batch_cancelled", "batch_canceled"):
            return ItemResult(cid, "canceled")
        return ItemResult(cid, "errored", error=self.provider.http_error(500, {"error": err_doc}))


def _first_error(doc: dict[str, Any]) -> dict[str, Any]:
    """The first of a failed batch's `errors.data`, or {}."""
    data = json_object(doc, "errors").get("data")
    return data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}


def _failure(doc: dict[str, Any]) -> str:
    first = _first_error(doc)
    if not first:
        return "the batch failed"
    message = str(first.get("message") or first.get("code") or "")
    return f"{message} ({first['code']})" if first.get("code") else message


class AzureBatches(OpenAIBatches):
    """Azure OpenAI's Batch API: a Global-Batch deployment under the resource's endpoint."""

    label = "Azure OpenAI Batch API"
