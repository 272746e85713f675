"""Writing a recording as it happens: one JSON line per event of an exchange, flushed at once.

The file is opened unbuffered, so each line is one `write` to the operating system: a process
killed mid-session (even by SIGKILL) leaves every line written before, and at worst a torn last
line, which the reader skips.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from ._format import (
    FORMAT,
    VERSION,
    clean_path,
    digest,
    jsonable_body,
    kept_headers,
    model_of,
    redact_bytes,
)
from ._reader import Recording, error, read_header, scan_last_exchange

_enc = json.encoder.encode_basestring_ascii


class Recorder:
    """Appends every HTTP exchange handed to it to one recording file (see `nbagent.recording`).

    `path` is created with a header line when it is new or empty; an existing recording is
    appended to (its header is checked first: a file that is not a recording, or one from a newer
    nbagent, is refused). `record_bodies=True` keeps each request's body, not only its digest.
    `made_by` says in the header what wrote the file. Thread-safe: many exchanges may be open at
    once (an agent's parallel requests, the mock server's connections).

    Args:
        path: The recording file (".nbrec"); created with a header line when new or empty.
        record_bodies: Whether to keep each request's body, not only its SHA-256 digest (a body may
            hold the prompt, never a key).
        made_by: What wrote the file, for its header.
        note: A note for the header.

    Raises:
        RecordingError: The file cannot be written, or it is not a recording or is from a newer
            nbagent (nothing is written then). Inside nbagent it is `nbagent.RecordingFileError`, a
            `ConfigError`.

    Attributes:
        path: The recording file.
        record_bodies: Whether request bodies are kept.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        record_bodies: bool = False,
        made_by: str = "nbagent recorder",
        note: str = "",
    ) -> None:
        self.path = Path(path)
        self.record_bodies = bool(record_bodies)
        self._lock = threading.Lock()
        self._next = 1
        try:
            size = self.path.stat().st_size if self.path.exists() else 0
            if size:
                read_header(self.path)  # refuse a file that is not ours before touching it
                self._next = scan_last_exchange(self.path) + 1
            self._file: BinaryIO | None = open(self.path, "ab", buffering=0)  # noqa: SIM115
        except OSError as exc:
            raise error(
                f"cannot write the recording {self.path} ({exc.strerror or exc}): "
                "pass a path in a folder that exists and can be written."
            ) from None
        if not size:
            header = {
                "kind": "header",
                "exchange": 0,
                "format": FORMAT,
                "version": VERSION,
                "made_by": made_by,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "record_bodies": self.record_bodies,
                "note": note,
            }
            self._write(json.dumps(header, ensure_ascii=True) + "\n")
        self._finalizer = weakref.finalize(self, _close, self._file)

    def __repr__(self) -> str:
        return f"Recorder({str(self.path)!r}, record_bodies={self.record_bodies})"

    def exchange(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        secrets: Iterable[str] = (),
    ) -> Exchange:
        """Start recording one request (call it when the request is sent). `headers` are the
        request's: none of them is written (they are where keys travel); they are taken so that
        a caller cannot pass them on by mistake. `secrets` (the caller's API keys) are masked
        wherever a server reflects them into what is recorded.

        Args:
            method: The HTTP method.
            url: The request's URL: only its path and the allowed query parameters are written (no
                host, no key).
            headers: The request's headers: taken but never written.
            body: The request body (its digest and size are written; the body itself with
                `record_bodies`).
            secrets: Strings (the caller's keys) masked wherever a server reflects them.

        Returns:
            The exchange, to feed the response, its chunks and its end.
        """
        del headers
        raw = body or b""
        hidden = tuple(s.encode() for s in secrets if s)
        with self._lock:
            number = self._next
            self._next += 1
        path = clean_path(url)
        line: dict[str, Any] = {
            "kind": "request",
            "exchange": number,
            "at": round(time.time(), 6),
            "method": method.upper(),
            "path": path,
            "model": model_of(path, raw),
            "body_sha256": digest(raw),
            "body_bytes": len(raw),
        }
        if self.record_bodies:
            line["body"] = jsonable_body(redact_bytes(raw, hidden) if hidden else raw)
        ex = Exchange(self, number, hidden)
        self._write(json.dumps(line, ensure_ascii=True) + "\n")
        return ex

    def _write(self, text: str) -> None:
        with self._lock:
            file = self._file
            if file is None:
                return  # closed: a late chunk of an exchange that outlived its recorder
            file.write(text.encode("ascii"))

    def close(self) -> None:
        """Close the file (every line is already written). Idempotent."""
        with self._lock:
            file, self._file = self._file, None
        if file is not None:
            file.close()
        self._finalizer.detach()


def _close(file: BinaryIO | None) -> None:
    if file is not None:
        file.close()


class Exchange:
    """One request being recorded: `response`, then `chunk` per piece of body as it arrives,
    then `end` (exactly once; later calls do nothing).

    Args:
        recorder: The recorder it writes through.
        number: Its number in the recording (1, 2, ...).
        hidden: The secrets to mask, as bytes.

    Attributes:
        number: Its number in the recording.
    """

    __slots__ = ("_ended", "_hidden", "_rec", "_t0", "number")

    def __init__(self, recorder: Recorder, number: int, hidden: tuple[bytes, ...]) -> None:
        self._rec = recorder
        self.number = number
        self._hidden = hidden
        self._t0 = time.perf_counter()
        self._ended = False

    def response(self, status: int, headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        """The status line and headers arrived (only the allowed headers are written).

        Args:
            status: The HTTP status.
            headers: The response headers (mapping or pairs).
        """
        kept = kept_headers(headers)
        if self._hidden:
            kept = {
                k: redact_bytes(v.encode(), self._hidden).decode("utf-8", "replace")
                for k, v in kept.items()
            }
        line = {
            "kind": "response",
            "exchange": self.number,
            "after_s": round(time.perf_counter() - self._t0, 6),
            "status": int(status),
            "headers": kept,
        }
        self._rec._write(json.dumps(line, ensure_ascii=True) + "\n")

    def chunk(self, data: bytes) -> None:
        """A piece of the body, as it came off the network.

        Args:
            data: The bytes, as they came (text is kept as text, anything else base64).
        """
        if not data or self._ended:
            return
        after = time.perf_counter() - self._t0
        if self._hidden:
            data = redact_bytes(data, self._hidden)
        try:
            field = '"data":' + _enc(data.decode("utf-8"))
        except UnicodeDecodeError:  # a character cut by the chunk's edge, or binary (gzip)
            field = '"data_b64":"' + base64.b64encode(data).decode("ascii") + '"'
        self._rec._write(
            f'{{"kind":"chunk","exchange":{self.number},"after_s":{after:.6f},{field}}}\n'
        )

    def end(self, error: str | None = None) -> None:
        """The exchange is over: `error` names how it broke (the connection reset, no answer),
        None when the body ended normally or the client stopped reading it.

        Args:
            error: How it broke, or None.
        """
        if self._ended:
            return
        self._ended = True
        line = {
            "kind": "end",
            "exchange": self.number,
            "after_s": round(time.perf_counter() - self._t0, 6),
            "error": None if error is None else self._clean(str(error)[:200]),
        }
        self._rec._write(json.dumps(line, ensure_ascii=True) + "\n")

    def _clean(self, text: str) -> str:
        if not self._hidden:
            return text
        return redact_bytes(text.encode(), self._hidden).decode("utf-8", "replace")


def write_recording(path: str | os.PathLike[str], recording: Recording) -> Path:
    """Write a whole `Recording` (one read back, trimmed, or assembled) to `path` in the
    recording format; the file appears complete or not at all.

    Args:
        path: Where to write.
        recording: The recording.

    Returns:
        The path written.

    Raises:
        RecordingError: The file cannot be written.
    """
    target = Path(path)
    header = {"kind": "header", "exchange": 0, "format": FORMAT, "version": VERSION}
    header.update({k: v for k, v in recording.header.items() if k not in header})
    lines = [json.dumps(header, ensure_ascii=True)]
    for ex in recording.exchanges:
        n = ex.number
        request: dict[str, Any] = {
            "kind": "request",
            "exchange": n,
            "at": ex.at,
            "method": ex.method,
            "path": ex.path,
            "model": ex.model,
            "body_sha256": ex.body_sha256,
            "body_bytes": ex.body_bytes,
        }
        if ex.body is not None:
            request["body"] = ex.body
        lines.append(json.dumps(request, ensure_ascii=True))
        if ex.status is not None:
            response = {
                "kind": "response",
                "exchange": n,
                "after_s": ex.response_after_s or 0.0,
                "status": ex.status,
                "headers": kept_headers(ex.headers),
            }
            lines.append(json.dumps(response, ensure_ascii=True))
        for after, data in ex.chunks:
            try:
                field: dict[str, str] = {"data": data.decode("utf-8")}
            except UnicodeDecodeError:
                field = {"data_b64": base64.b64encode(data).decode("ascii")}
            chunk = {"kind": "chunk", "exchange": n, "after_s": after, **field}
            lines.append(json.dumps(chunk, ensure_ascii=True))
        if ex.complete:
            end = {"kind": "end", "exchange": n, "after_s": ex.end_after_s, "error": ex.error}
            lines.append(json.dumps(end, ensure_ascii=True))
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text("\n".join(lines) + "\n", encoding="ascii")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise error(f"cannot write the recording {target} ({exc.strerror or exc}).") from None
    return target
