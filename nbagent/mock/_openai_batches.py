"""OpenAI's Batch API on the mock server (and Azure OpenAI's, under ``/openai/``).

The shapes are openai-python's ``types/batch.py`` and ``resources/batches.py`` and the Batch
guide (platform.openai.com/docs/guides/batch): ``status`` ``validating`` / ``failed`` /
``in_progress`` / ``finalizing`` / ``completed`` / ``expired`` / ``cancelling`` / ``cancelled``
(two l's); ``request_counts {total, completed, failed}``, which move while the batch runs. The
input file is validated as OpenAI does it, after the create was accepted: a bad line makes the
batch ``failed`` with ``errors.data[{code, line, message, param}]`` (codes ``invalid_json_line``,
``duplicate_custom_id``, ``url_mismatch``, ``model_mismatch``, ``empty_file``,
``too_many_tasks``), never an HTTP error. When the batch ends, its answers go to the output
file and its errored requests (a 4xx or 5xx ``response``) to the error file, in the order they
ended; on expiry the requests that never ran are ``batch_expired`` lines in the error file while
the finished ones stay in the output file; a batch whose every line failed is ``completed`` with
``output_file_id: null``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from . import _batch_items as item
from . import _files as files
from ._batch_api import EVERY, BatchAPI, Paging, Row, list_body, rows
from ._batch_timeline import Batch, ItemOutcome, Items, Provider, Snapshot, stable_id
from ._call import Call, CallError
from ._conversation import Format
from ._fault_answers import reply
from ._openai_wire import OPENAI

MAX_REQUESTS = 50_000
DAY_S = 86_400
_FORMATS: dict[str, Format] = {"/chat/completions": "openai", "/responses": "responses"}
EXPIRED = "This request could not be executed before the completion window expired."


def _bare(url: str) -> str:
    """``/v1/chat/completions`` and Azure's ``/chat/completions`` name the same endpoint."""
    url = url.split("?", 1)[0].rstrip("/")
    return url.removeprefix("/openai").removeprefix("/v1") or url


def _seconds(t: float | None) -> int | None:
    return None if t is None else int(t)


def _not_found(call: Call, batch_id: str) -> CallError:
    body = OPENAI.bad_request(f"No batch found with id '{batch_id}'.", "", "batch_id")
    return CallError(404, body)


def _answer(call: Call, batch: Batch, snap: Snapshot) -> None:
    reply(call, batch_json(call, batch, snap))


API = BatchAPI(
    format="openai",
    status={
        "validating": "validating",
        "in_progress": "in_progress",
        "finalizing": "finalizing",
        "canceling": "cancelling",
        "completed": "completed",
        "expired": "expired",
        "canceled": "cancelled",
        "failed": "failed",
    },
    counts={"total": EVERY, "completed": ("succeeded",), "failed": ("errored", "expired")},
    paging=Paging("limit", 20, 100, "after"),
    id_prefix="batch_",
    id_length=32,
    id_alphabet="0123456789abcdef",
    not_found=_not_found,
    answer=_answer,
)


# --- the input file -----------------------------------------------------------------------------


def _line_error(code: str, line: int, message: str, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "line": line, "message": message, "param": param}


_DUPLICATE = "The custom_id '{}' is used more than once in this file."
_SAME_MODEL = "Every request in a batch must use the same model ('{}', not '{}')."


def _check_line(
    line: Any, endpoint: str, seen: set[str], model: str | None
) -> list[tuple[str, str, str | None]]:
    """What is wrong with one line, as ``(code, message, param)``."""
    if not isinstance(line, dict):
        return [("invalid_json_line", "This line is not parseable as valid JSON.", None)]
    wrong: list[tuple[str, str, str | None]] = []
    custom_id, body = line.get("custom_id"), line.get("body")
    if not isinstance(custom_id, str) or not custom_id:
        wrong.append(("missing_required_parameter", "Missing 'custom_id'.", "custom_id"))
    elif custom_id in seen:
        wrong.append(("duplicate_custom_id", _DUPLICATE.format(custom_id), "custom_id"))
    if line.get("method") != "POST":
        wrong.append(("invalid_method", "The method must be 'POST'.", "method"))
    if not isinstance(line.get("url"), str) or _bare(line["url"]) != _bare(endpoint):
        message = f"The url must match the batch's endpoint '{endpoint}'."
        wrong.append(("url_mismatch", message, "url"))
    if not isinstance(body, dict):
        wrong.append(("invalid_body", "The body must be an object.", "body"))
    elif model is not None and body.get("model") != model:
        message = _SAME_MODEL.format(model, body.get("model"))
        wrong.append(("model_mismatch", message, "body.model"))
    return wrong


def read_input(
    data: bytes, endpoint: str
) -> tuple[list[int], list[str | None], list[Any], list[dict[str, Any]], str | None]:
    """The input file's lines: their starts, custom ids, bodies, and the validation errors."""
    starts: list[int] = []
    ids: list[str | None] = []
    bodies: list[Any] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    model: str | None = None
    position = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        start, position = position, position + len(raw) + 1
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            line = None
        wrong = _check_line(line, endpoint, seen, model)
        errors += [_line_error(code, number, message, param) for code, message, param in wrong]
        if isinstance(line, dict):
            seen.add(str(line.get("custom_id")))
        if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
            continue
        custom_id, body = line.get("custom_id"), line["body"]
        if model is None:
            model = body.get("model") if isinstance(body.get("model"), str) else None
        starts.append(start)
        ids.append(custom_id if isinstance(custom_id, str) else None)
        bodies.append(body)
    if not starts and not errors:
        errors.append(_line_error("empty_file", 0, "The input file is empty."))
    if len(starts) > MAX_REQUESTS:
        message = (
            f"The input file has {len(starts)} requests; a batch takes at most {MAX_REQUESTS}."
        )
        errors.append(_line_error("too_many_tasks", 0, message))
    return starts, ids, bodies, errors, model


# --- the batch object ---------------------------------------------------------------------------


def batch_json(call: Call, batch: Batch, snap: Snapshot) -> dict[str, Any]:
    extra = batch.extra
    phase = snap.phase
    if snap.ended_at is not None:
        with call.store.lock:
            if "output_file_id" not in extra:
                _make_files(call, batch, snap)
    validating = phase == "validating" or phase == "failed"
    expires = batch.created + (batch.expire_after if batch.expire_after is not None else DAY_S)
    ended = _seconds(snap.ended_at)
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": extra["endpoint"],
        "errors": {"object": "list", "data": batch.failed} if batch.failed else None,
        "input_file_id": extra["input_file_id"],
        "completion_window": extra["completion_window"],
        "status": API.status[phase],
        "output_file_id": extra.get("output_file_id"),
        "error_file_id": extra.get("error_file_id"),
        "created_at": int(batch.created),
        "in_progress_at": _seconds(snap.in_progress_at),
        "expires_at": int(expires),
        "finalizing_at": _seconds(snap.finalizing_at),
        "completed_at": ended if phase == "completed" else None,
        "failed_at": ended if phase == "failed" else None,
        "expired_at": ended if phase == "expired" else None,
        "cancelling_at": _seconds(batch.cancel_at),
        "cancelled_at": ended if phase == "canceled" else None,
        "request_counts": {k: 0 if validating else v for k, v in API.count(batch, snap).items()},
        "metadata": extra["metadata"],
        "model": extra["model"],
        "usage": None,
    }


def _make_files(call: Call, batch: Batch, snap: Snapshot) -> None:
    counts = batch.counts(snap)
    extra = batch.extra
    output = error = None
    if counts["succeeded"]:
        output = _batch_file(call, batch, "output", counts["succeeded"], snap)
    bad = counts["errored"] + (counts["expired"] if snap.phase == "expired" else 0)
    if bad:
        error = _batch_file(call, batch, "error", bad, snap)
    extra["output_file_id"] = output
    extra["error_file_id"] = error


def _batch_file(call: Call, batch: Batch, kind: str, count: int, snap: Snapshot) -> str:
    fmt: Format = batch.extra["format"]

    def lines() -> Iterator[bytes]:
        for index in batch.ended_in_order(snap):
            outcome = batch.items.outcomes[index]
            if outcome.errored == (kind == "error"):
                yield _line(call, batch, index, fmt)
        if kind == "error" and snap.phase == "expired":
            for index in batch.unfinished_in_order(snap):
                error = {"code": "batch_expired", "message": EXPIRED}
                yield _batch_line(batch, index, None, error)

    file = files.StoredFile(
        files.new_file_id(),
        batch.provider,
        f"{batch.id}_{kind}.jsonl",
        "batch_output",
        int(snap.ended_at or snap.now),
        lines=lines,
        count=count,
    )
    return files.add_file(call, file).id


def _line(call: Call, batch: Batch, index: int, fmt: Format) -> bytes:
    body = item.json_line(batch.items.line(index))["body"]
    request_id = stable_id(batch.id + "/request", index, 32)
    prefix = "resp_" if fmt == "responses" else "chatcmpl-"
    message_id = prefix + stable_id(batch.id, index, 29)
    outcome = batch.items.outcomes[index]
    model = str(body.get("model", ""))
    status, answer = item.result(
        call, fmt, body, outcome, message_id, model=model, request_id=request_id
    )
    response = {"status_code": status, "request_id": request_id, "body": answer}
    return _batch_line(batch, index, response, None)


def _batch_line(batch: Batch, index: int, response: Any, error: Any) -> bytes:
    line = {
        "id": "batch_req_" + stable_id(batch.id + "/line", index, 32),
        "custom_id": batch.items.ids[index],
        "response": response,
        "error": error,
    }
    return item.compact(line) + b"\n"


# --- endpoints ----------------------------------------------------------------------------------


def create(call: Call) -> None:
    body = call.json_body()
    if not isinstance(body, dict):
        call.refuse(400, "The body must be a JSON object.", None)
    input_file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
    window, metadata = body.get("completion_window"), body.get("metadata")
    if not isinstance(input_file_id, str):
        call.refuse(400, "Missing required parameter: 'input_file_id'.", "input_file_id")
    if not isinstance(endpoint, str):
        call.refuse(400, "Missing required parameter: 'endpoint'.", "endpoint")
    if window != "24h":
        call.refuse(
            400, f"Invalid value: {window!r}. Supported values are: '24h'.", "completion_window"
        )
    _check_metadata(call, metadata)
    fmt = _FORMATS.get(_bare(endpoint))
    if fmt is None:
        call.refuse(
            400,
            f"The mock server answers batches for /v1/chat/completions and /v1/responses, "
            f"not {endpoint!r}.",
            "endpoint",
        )
    try:
        file = files.find(call, input_file_id)
    except CallError:
        message = f"Invalid 'input_file_id': '{input_file_id}'. File not found."
        call.refuse(400, message, "input_file_id")
    data = file.data or b""
    starts, ids, bodies, errors, model = read_input(data, endpoint)
    outcomes: list[ItemOutcome] = []
    if not errors:
        outcomes = [item.outcome_of(call, fmt, body) for body in bodies]
        errors = [_token_limit(model)] if call.fault.kind == "failed" else []
    del bodies
    items = Items.over(data, starts, ids, outcomes) if outcomes else Items()
    batch = call.store.add(
        API.new_id(),
        call.api,
        items,
        endpoint=endpoint,
        input_file_id=input_file_id,
        completion_window=window,
        metadata=metadata,
        model=model,
        errors=errors,
        format=fmt,
        request_key="body",
    )
    call.body = {"input_file_id": input_file_id, "endpoint": endpoint, "metadata": metadata}
    reply(call, batch_json(call, batch, call.store.snapshot(batch)))


def _token_limit(model: str | None) -> dict[str, Any]:
    message = (
        f"Enqueued token limit reached for {model} in organization org-nbagent-mock. "
        "Limit: 90,000 enqueued tokens. Please try again once some in_progress batches have "
        "been completed."
    )
    return {"code": "token_limit_exceeded", "line": None, "message": message, "param": None}


def _check_metadata(call: Call, metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or len(metadata) > 16:
        call.refuse(400, "metadata must be an object of at most 16 pairs.", "metadata")
    for key, value in metadata.items():
        if len(key) > 64 or not isinstance(value, str) or len(value) > 512:
            call.refuse(
                400,
                "metadata keys are at most 64 characters and values strings of at most 512.",
                "metadata",
            )


def list_batches(call: Call) -> None:
    batches, more = API.page(call)
    data = [batch_json(call, b, call.store.snapshot(b)) for b in batches]
    reply(call, list_body(data, more, object="list"))


_MULTIPART = files.MAX_FILE_BYTES + 1024 * 1024
_ROWS: list[Row] = [
    ("POST", "/files/?", "upload", files.upload),
    ("GET", "/files/?", None, files.list_files),
    ("GET", "/files/(?P<id>[^/]+)/content/?", "results", files.content),
    ("GET", "/files/(?P<id>[^/]+)/?", None, files.retrieve),
    ("DELETE", "/files/(?P<id>[^/]+)/?", "delete", files.delete),
    ("POST", "/batches/?", "create", create),
    ("GET", "/batches/?", "list", list_batches),
    ("POST", "/batches/(?P<id>[^/]+)/cancel/?", "cancel", API.cancel),
    ("GET", "/batches/(?P<id>[^/]+)/?", "retrieve", API.retrieve),
]
# OpenAI's paths, and Azure OpenAI's under /openai/ (its v1 API, and the older one)
_PREFIXES: tuple[tuple[str, Provider], ...] = (("/v1", "openai"), ("/openai(?:/v1)?", "azure"))
ENDPOINTS = [
    row
    for prefix, provider in _PREFIXES
    for row in rows(API, provider, prefix, _ROWS, upload=_MULTIPART)
]
