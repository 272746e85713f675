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
from ._reader import RecordedExchange, Recording, error, read_header, scan_last_exchange

_REQUEST_FIELDS = ("at", "method", "path", "model", "body_sha256", "body_bytes")


def _line(kind: str, number: int, **fields: Any) -> str:
    """One line of the file: its kind, its exchange's number (0 for the header), its fields."""
    return json.dumps({"kind": kind, "exchange": number, **fields}, ensure_ascii=True) + "\n"


def _header(fields: Mapping[str, Any]) -> str:
    """The header line: the format and version, then `fields` (never in their place)."""
    own = {"format": FORMAT, "version": VERSION}
    rest = {k: v for k, v in fields.items() if k not in ("kind", "exchange", *own)}
    return _line("header", 0, **own, **rest)


def _request(ex: RecordedExchange) -> str:
    fields = {k: getattr(ex, k) for k in _REQUEST_FIELDS}
    if ex.body is not None:
        fields["body"] = ex.body
    return _line("request", ex.number, **fields)


def _chunk(number: int, after: float, data: bytes) -> str:
    """A piece of body: text when it is UTF-8, else base64 (a character cut by the chunk's
    edge, or binary such as gzip)."""
    try:
        field = {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        field = {"data_b64": base64.b64encode(data).decode("ascii")}
    return _line("chunk", number, after_s=after, **field)


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
                "made_by": made_by,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "record_bodies": self.record_bodies,
                "note": note,
            }
            self._write(_header(header))
        self._finalizer = weakref.finalize(self, self._file.close)  # (holds the file, not self)

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
        kept = redact_bytes(raw, hidden) if hidden and self.record_bodies else raw
        request = RecordedExchange(
            number,
            round(time.time(), 6),
            method.upper(),
            path,
            model_of(path, raw),
            digest(raw),
            len(raw),
            body=jsonable_body(kept) if self.record_bodies else None,
        )
        ex = Exchange(self, number, hidden)
        self._write(_request(request))
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


def recorder_for(record: str | os.PathLike[str] | Recorder, made_by: str) -> Recorder:
    """What a `record=` argument names: the `Recorder` given, or a new one appending to the
    path, `made_by` saying in a new file's header what wrote it (a `RecordingError` for
    anything else)."""
    if isinstance(record, Recorder):
        return record
    if not isinstance(record, (str, os.PathLike)):
        raise error(
            f"record= takes a path for the recording (e.g. 'storm.nbrec') or a Recorder, "
            f"not {type(record).__name__}."
        )
    return Recorder(record, made_by=made_by)


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
        kept = {k: self._clean(v) for k, v in kept_headers(headers).items()}
        line = _line(
            "response", self.number, after_s=self._after(), status=int(status), headers=kept
        )
        self._rec._write(line)

    def chunk(self, data: bytes) -> None:
        """A piece of the body, as it came off the network.

        Args:
            data: The bytes, as they came (text is kept as text, anything else base64).
        """
        if not data or self._ended:
            return
        after = self._after()
        if self._hidden:
            data = redact_bytes(data, self._hidden)
        self._rec._write(_chunk(self.number, after, data))

    def end(self, error: str | None = None) -> None:
        """The exchange is over: `error` names how it broke (the connection reset, no answer),
        None when the body ended normally or the client stopped reading it.

        Args:
            error: How it broke, or None.
        """
        if self._ended:
            return
        self._ended = True
        cleaned = None if error is None else self._clean(str(error)[:200])
        self._rec._write(_line("end", self.number, after_s=self._after(), error=cleaned))

    def _after(self) -> float:
        return round(time.perf_counter() - self._t0, 6)

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
    lines = [_header(recording.header)]
    for ex in recording.exchanges:
        n = ex.number
        lines.append(_request(ex))
        if ex.status is not None:
            after = ex.response_after_s or 0.0
            headers = kept_headers(ex.headers)
            lines.append(_line("response", n, after_s=after, status=ex.status, headers=headers))
        lines += [_chunk(n, after, data) for after, data in ex.chunks]
        if ex.complete:
            lines.append(_line("end", n, after_s=ex.end_after_s, error=ex.error))
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text("".join(lines), encoding="ascii")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise error(f"cannot write the recording {target} ({exc.strerror or exc}).") from None
    return target
