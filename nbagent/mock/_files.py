"""OpenAI's Files API on the mock server, as much of it as the Batch API needs.

The shapes are openai-python's ``types/file_object.py`` and ``resources/files.py``: an upload is
``multipart/form-data`` with ``purpose`` and ``file``; a file is ``object: "file"`` with
``bytes``, ``filename``, ``purpose``, ``status: "processed"``. A batch's output and error files
are made when the batch ends and written when they are downloaded, line by line, so a results
file of 100,000 answers is never held whole.
"""

from __future__ import annotations

from email.parser import BytesParser
from email.policy import HTTP
from typing import cast

from ._batch_api import Paging, list_body
from ._batch_timeline import StoredFile
from ._call import Call
from ._fault_answers import reply, reply_stream

MAX_FILE_BYTES = 200 * 1024 * 1024


def add_file(call: Call, file: StoredFile) -> StoredFile:
    with call.store.lock:
        call.store.files[file.id] = file
    return file


def find(call: Call, file_id: str) -> StoredFile:
    file = call.store.files.get(file_id)
    if file is None:
        call.refuse(404, f"No such File object: {file_id}", "id")
    return file


def parse_multipart(call: Call) -> dict[str, tuple[str | None, bytes]]:
    """The fields of the call's ``multipart/form-data`` body: name -> (filename, content)."""
    head = f"Content-Type: {call.header('content-type')}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + call.read_body())
    if not message.is_multipart():
        call.refuse(400, "Could not read the upload: the multipart body names no boundary.")
    return {
        str(part.get_param("name", header="content-disposition")): (
            part.get_filename(),
            cast(bytes, part.get_payload(decode=True)),
        )
        for part in message.iter_parts()
    }


# --- endpoints ----------------------------------------------------------------------------------


def upload(call: Call) -> None:
    fields = parse_multipart(call)
    purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace").strip()
    if "file" not in fields:
        call.refuse(400, "Missing required parameter: 'file'.", "file")
    filename, data = fields["file"]
    if len(data) > MAX_FILE_BYTES:
        call.refuse(400, f"File is larger than the {MAX_FILE_BYTES} bytes allowed.", "file")
    file = StoredFile(
        call.api,
        filename or "upload.jsonl",
        purpose,
        int(call.store.now()),
        data=data,
    )
    add_file(call, file)
    call.body = {"purpose": purpose, "filename": file.filename, "bytes": file.bytes}
    reply(call, file.json())


def retrieve(call: Call) -> None:
    reply(call, find(call, call.params["id"]).json())


def content(call: Call) -> None:
    file = find(call, call.params["id"])
    pieces = 1 if file.data is not None else max(1, file.count)
    reply_stream(call, file.content(), "application/octet-stream", pieces)


def delete(call: Call) -> None:
    file = find(call, call.params["id"])
    with call.store.lock:
        call.store.files.pop(file.id, None)
    reply(call, {"id": file.id, "object": "file", "deleted": True})


_PAGING = Paging("limit", 10_000, 10_000, "after")


def list_files(call: Call) -> None:
    purpose = call.query.get("purpose")
    with call.store.lock:
        files = [f for f in reversed(call.store.files.values()) if f.provider == call.api]
    files = [f for f in files if f.purpose == purpose or not purpose]
    page, more = _PAGING.page(call, files, lambda f: f.id)
    reply(call, list_body([f.json() for f in page], more, object="list"))
