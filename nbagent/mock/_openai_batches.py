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
from functools import partial
from typing import Any, get_args

from . import _batch_items as item
from . import _files as files
from ._batch_api import BatchAPI, Paging, Row, list_body
from ._batch_timeline import EVERY, Batch, Items, Phase, Provider, Snapshot, StoredFile, stable_id
from ._call import Call
from ._codec import Route
from ._conversation import Format
from ._formats import route
from ._request_parsers import _require_dict

MAX_REQUESTS = 50_000
BATCHED = "/v1/chat/completions and /v1/responses"
EXPIRED = "This request could not be executed before the completion window expired."


def _format(url: Any) -> Format | None:
    """The wire format of a batch's endpoint or a line's url, by the recordings' one table of
    paths (``/v1/chat/completions`` and Azure's ``/chat/completions`` speak the same); None for
    one the mock does not batch."""
    found = route(url) if isinstance(url, str) else None
    return found.format if found is not None and found.format in ("openai", "responses") else None


def _bare(url: str) -> str:
    """``/v1/chat/completions`` and Azure's ``/openai/chat/completions`` name one endpoint."""
    url = url.split("?", 1)[0].rstrip("/")
    return url.removeprefix("/openai").removeprefix("/v1") or url


# --- the input file -----------------------------------------------------------------------------


def _line_error(
    code: str, line: int | None, message: str, param: str | None = None
) -> dict[str, Any]:
    return {"code": code, "line": line, "message": message, "param": param}


_DUPLICATE = "The custom_id '{}' is used more than once in this file."
_TOKEN_LIMIT = (  # what a batch that fails after it was accepted (create:failed) says
    "Enqueued token limit reached for {} in organization org-nbagent-mock. Limit: 90,000 "
    "enqueued tokens. Please try again once some in_progress batches have been completed."
)
_SAME_MODEL = "Every request in a batch must use the same model ('{}', not '{}')."


def _check_line(
    line: Any, endpoint: str, seen: set[str], model: str | None
) -> Iterator[tuple[str, str, str | None]]:
    """What is wrong with one line, as ``(code, message, param)``; its custom id is then
    ``seen``."""
    if not isinstance(line, dict):
        yield ("invalid_json_line", "This line is not parseable as valid JSON.", None)
        return
    custom_id, body = line.get("custom_id"), line.get("body")
    if not isinstance(custom_id, str) or not custom_id:
        yield ("missing_required_parameter", "Missing 'custom_id'.", "custom_id")
    elif custom_id in seen:
        yield ("duplicate_custom_id", _DUPLICATE.format(custom_id), "custom_id")
    if line.get("method") != "POST":
        yield ("invalid_method", "The method must be 'POST'.", "method")
    if not isinstance(line.get("url"), str) or _bare(line["url"]) != _bare(endpoint):
        message = f"The url must match the batch's endpoint '{endpoint}'."
        yield ("url_mismatch", message, "url")
    if not isinstance(body, dict):
        yield ("invalid_body", "The body must be an object.", "body")
    elif model is not None and body.get("model") != model:
        message = _SAME_MODEL.format(model, body.get("model"))
        yield ("model_mismatch", message, "body.model")
    seen.add(str(custom_id))


def read_input(
    call: Call, data: bytes, endpoint: str, fmt: Format
) -> tuple[Items, list[dict[str, Any]], str | None]:
    """The input file's lines as the batch's items (none when the file has errors: no line
    runs), the validation errors, and the model the lines name."""
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
    if errors:
        return Items(), errors, model
    route = Route(fmt)
    outcomes = [item.outcome_of(call, route, body) for body in bodies]
    return Items(data, starts, ids, outcomes), errors, model


# --- the batch object ---------------------------------------------------------------------------

_ENDS: tuple[Phase, ...] = ("completed", "failed", "expired", "canceled")


def batch_json(call: Call, batch: Batch, snap: Snapshot) -> dict[str, Any]:
    extra = batch.extra
    phase = snap.phase
    if snap.ended_at is not None:
        with call.store.lock:
            if "output_file_id" not in extra:
                extra["output_file_id"] = _batch_file(call, batch, snap, errors=False)
                extra["error_file_id"] = _batch_file(call, batch, snap, errors=True)
    validating = phase == "validating" or phase == "failed"
    ended = API.time(snap.ended_at)
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": extra["endpoint"],
        "errors": {"object": "list", "data": batch.failed} if batch.failed else None,
        "input_file_id": extra["input_file_id"],
        "completion_window": "24h",  # the only one there is
        "status": API.status[phase],
        "output_file_id": extra.get("output_file_id"),
        "error_file_id": extra.get("error_file_id"),
        "created_at": int(batch.created),
        "in_progress_at": API.time(snap.in_progress_at),
        "expires_at": API.expires(batch),
        "finalizing_at": API.time(snap.finalizing_at),
        "cancelling_at": API.time(batch.cancel_at),
        # completed_at, failed_at, expired_at, cancelled_at: the moment of the end it came to
        **{f"{API.status[end]}_at": ended if phase == end else None for end in _ENDS},
        "request_counts": {k: 0 if validating else v for k, v in API.count(batch, snap).items()},
        "metadata": extra["metadata"],
        "model": extra["model"],
        "usage": None,
    }


def _batch_file(call: Call, batch: Batch, snap: Snapshot, errors: bool) -> str | None:
    """The id of its output file (``errors``: its error file, where the expired items are too,
    the canceled ones being nowhere), None when it would be empty."""
    count = API.count(batch, snap)["failed" if errors else "completed"]
    if not count:
        return None
    expired = {"code": "batch_expired", "message": EXPIRED}
    line = partial(_line, call, batch, errors=errors)
    rest = partial(_batch_line, batch, response=None, error=expired)
    ends = rest if errors and snap.phase == "expired" else None
    file = StoredFile(
        batch.provider,
        f"{batch.id}_{'error' if errors else 'output'}.jsonl",
        "batch_output",
        int(snap.ended_at or snap.now),
        lines=lambda: batch.lines(snap, line, ends),
        count=count,
    )
    return files.add_file(call, file).id


def _line(call: Call, batch: Batch, index: int, errors: bool) -> bytes | None:
    """Item ``index``'s line of the output file (``errors``: of the error file); None when it
    goes in the other."""
    if batch.items.outcomes[index].errored != errors:
        return None
    status, answer = item.result(call, batch, index)
    response = {"status_code": status, "request_id": item.request_id(batch, index), "body": answer}
    return _batch_line(batch, index, response, None)


def _batch_line(batch: Batch, index: int, response: Any, error: Any) -> bytes:
    line = {
        "id": "batch_req_" + stable_id(batch.id + "/line", index, 32),
        "custom_id": batch.items.ids[index],
        "response": response,
        "error": error,
    }
    return item.compact(line) + b"\n"


API = BatchAPI(
    format="openai",
    # the neutral words, but that cancelling and cancelled have two l's
    status={**{p: p for p in get_args(Phase)}, "canceling": "cancelling", "canceled": "cancelled"},
    counts={"total": EVERY, "completed": ("succeeded",), "failed": ("errored", "expired")},
    paging=Paging("limit", 20, 100, "after"),
    id_style=("batch_", 32, "0123456789abcdef"),
    not_found="No batch found with id '{}'.",
    not_found_as=400,
    body=batch_json,
    listing=partial(list_body, object="list"),
    deletes=False,
    request_key="body",
)


# --- endpoints ----------------------------------------------------------------------------------


def create(call: Call) -> None:
    body = _require_dict(call.json_body(), "body")
    input_file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
    window, metadata = body.get("completion_window"), body.get("metadata")
    if not isinstance(input_file_id, str):
        call.refuse(400, "Missing required parameter: 'input_file_id'.", "input_file_id")
    if not isinstance(endpoint, str):
        call.refuse(400, "Missing required parameter: 'endpoint'.", "endpoint")
    if window != "24h":
        message = f"Invalid value: {window!r}. Supported values are: '24h'."
        call.refuse(400, message, "completion_window")
    _check_metadata(call, metadata)
    fmt = _format(endpoint)
    if fmt is None:
        message = f"The mock server answers batches for {BATCHED}, not {endpoint!r}."
        call.refuse(400, message, "endpoint")
    file = call.store.files.get(input_file_id)
    if file is None:
        message = f"Invalid 'input_file_id': '{input_file_id}'. File not found."
        call.refuse(400, message, "input_file_id")
    items, errors, model = read_input(call, file.data or b"", endpoint, fmt)
    if not errors and call.fault.kind == "failed":
        errors = [_line_error("token_limit_exceeded", None, _TOKEN_LIMIT.format(model))]
    record = {"input_file_id": input_file_id, "endpoint": endpoint, "metadata": metadata}
    API.add(call, items, record, Route(fmt), extra={**record, "model": model}, failed=errors)


def _check_metadata(call: Call, metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or len(metadata) > 16:
        call.refuse(400, "metadata must be an object of at most 16 pairs.", "metadata")
    if any(len(k) > 64 or not isinstance(v, str) or len(v) > 512 for k, v in metadata.items()):
        message = "metadata keys are at most 64 characters and values strings of at most 512."
        call.refuse(400, message, "metadata")


_MULTIPART = files.MAX_FILE_BYTES + 1024 * 1024
_ROWS: list[Row] = [
    ("POST", "/files/?", "upload", files.upload),
    ("GET", "/files/?", None, files.list_files),
    ("GET", "/files/(?P<id>[^/]+)/content/?", "results", files.content),
    ("GET", "/files/(?P<id>[^/]+)/?", None, files.retrieve),
    ("DELETE", "/files/(?P<id>[^/]+)/?", "delete", files.delete),
    ("POST", "/batches/?", "create", create),
]
# OpenAI's paths, and Azure OpenAI's under /openai/ (its v1 API, and the older one)
_PREFIXES: tuple[tuple[str, Provider], ...] = (("/v1", "openai"), ("/openai(?:/v1)?", "azure"))
ENDPOINTS = [
    row
    for prefix, provider in _PREFIXES
    for row in API.rows(provider, prefix, _ROWS, upload=_MULTIPART)
]
