"""Reading a recording back: the header checked, the lines gathered into exchanges.

A torn last line (the writer killed mid-line) is skipped; any other line that is not a
recording's JSON is an error naming the line, as is a file from a newer nbagent.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._format import FORMAT, VERSION, json_or_none


class RecordingError(ValueError):
    """A recording that cannot be read or written; the message says which and why.

    Inside nbagent it is raised as `nbagent.errors.ConfigError` too (see `set_error_type`)."""


_error_type: type[RecordingError] = RecordingError


def set_error_type(cls: type[RecordingError]) -> None:
    """The seam `nbagent.errors` fills: recording errors are raised as `cls` (a subclass of
    `RecordingError` that is also a `ConfigError`), so this module imports nothing of nbagent.

    Args:
        cls: The class to raise.
    """
    global _error_type
    _error_type = cls


def error(message: str) -> RecordingError:
    return _error_type(message)


@dataclass
class RecordedExchange:
    """One recorded request and what came back. `chunks` are (seconds after the request, bytes);
    `status` is None when no answer came (the connection failed or was closed first);
    `complete` is False when the recording stops inside it (the recorder was killed).

    Attributes:
        number: Its number in the recording.
        at: When the request was sent (Unix seconds).
        method: The HTTP method.
        path: The path and kept query.
        model: The model asked for, or None.
        body_sha256: The request body's SHA-256 digest (hex); recordings of the same request share
            it.
        body_bytes: The request body's size.
        body: The request body, when the recorder kept bodies.
        status: The HTTP status, or None.
        headers: The kept response headers.
        response_after_s: Seconds from the request to the status line.
        chunks: The body's pieces with their times.
        end_after_s: Seconds from the request to the end.
        error: How it broke, or None.
        complete: Whether its end was recorded.
    """

    number: int
    at: float
    method: str
    path: str
    model: str | None
    body_sha256: str
    body_bytes: int
    body: Any = None
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    response_after_s: float | None = None
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    end_after_s: float | None = None
    error: str | None = None
    complete: bool = False

    @property
    def body_data(self) -> bytes:
        """The whole response body as it arrived."""
        return b"".join(data for _, data in self.chunks)

    @property
    def duration_s(self) -> float:
        """Seconds from the request to its end (or to the last thing recorded)."""
        times = [self.end_after_s, self.response_after_s, *(t for t, _ in self.chunks[-1:])]
        return max((t for t in times if t is not None), default=0.0)


@dataclass
class Recording:
    """A recording read back: its header and its exchanges in the order they were sent.

    Attributes:
        path: The file it was read from, or None for one assembled in memory.
        header: The header's fields.
        exchanges: The exchanges, in the order they were sent.
    """

    path: Path | None
    header: dict[str, Any]
    exchanges: list[RecordedExchange]

    def __len__(self) -> int:
        return len(self.exchanges)

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "<memory>"
        return f"Recording({where!r}, {len(self.exchanges)} exchanges)"

    @property
    def duration_s(self) -> float:
        """From the first request to the end of the last exchange."""
        if not self.exchanges:
            return 0.0
        t0 = self.exchanges[0].at
        return max(ex.at - t0 + ex.duration_s for ex in self.exchanges)


def _check_header(doc: Any, path: Path) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("kind") != "header" or doc.get("format") != FORMAT:
        raise error(
            f"{path} is not an nbagent recording (its first line is not an "
            f"{FORMAT} header): pass a .nbrec file written by nbagent."
        )
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise error(f"{path} has no valid format version in its header.")
    if version > VERSION:
        raise error(
            f"{path} was written in recording format version {version}, newer than "
            f"this nbagent reads (up to {VERSION}): upgrade nbagent to replay it."
        )
    return doc


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of the recording at `path`, checked (not the rest of the file).

    Args:
        path: The recording file.

    Returns:
        The header's fields (format, version, made_by, created_at, ...).

    Raises:
        RecordingError: The file is missing, not a recording, or from a newer nbagent.
    """
    p = Path(path)
    try:
        with open(p, "rb") as f:
            first = f.readline()
    except OSError as exc:
        raise error(f"cannot read the recording {p} ({exc.strerror or exc}).") from None
    return _check_header(json_or_none(first), p)


def scan_last_exchange(path: Path) -> int:
    """The highest exchange number in the file (for appending)."""
    numbers = [doc.get("exchange") for _, doc in _lines(path)]
    return max([0, *(n for n in numbers if isinstance(n, int))])


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read the recording {path} ({exc.strerror or exc}).") from None
    lines = data.split(b"\n")
    torn = not data.endswith(b"\n")
    first = True
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        doc = json_or_none(raw)
        if first:
            first = False
            _check_header(doc, path)
        if doc is None:
            if torn and i == len(lines):
                return  # the writer was killed mid-line: everything before it stands
            raise error(
                f"line {i} of the recording {path} is not JSON: the file is damaged "
                "(a recording is written one JSON object per line)."
            )
        if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
            raise error(f"line {i} of the recording {path} is not a recording line.")
        yield i, doc


def _num(doc: dict[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{where} has no number in {key!r}.")
    return float(value)


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a recording file. Raises `RecordingError` (a `ConfigError` inside nbagent) with one
    sentence for a file that is missing, not a recording, damaged, or from a newer nbagent.

    Args:
        path: The recording file.

    Returns:
        The header and every exchange, in the order they were sent.

    Raises:
        RecordingError: The file is missing, not a recording, damaged, or from a newer nbagent.
    """
    p = Path(path)
    if not p.is_file():
        raise error(f"no recording at {p}: pass the path of a .nbrec file.")
    header: dict[str, Any] | None = None
    by_number: dict[int, RecordedExchange] = {}
    for i, doc in _lines(p):
        kind = doc["kind"]
        where = f"line {i} of the recording {p}"
        # the first line is the file's header (`_lines` checked it); an appended session's
        # header changes nothing
        if kind == "header":
            header = header or doc
            continue
        number = doc.get("exchange")
        if not isinstance(number, int) or isinstance(number, bool):
            raise error(f"{where} names no exchange number.")
        if kind == "request":
            by_number[number] = RecordedExchange(
                number=number,
                at=_num(doc, "at", where),
                method=str(doc.get("method", "POST")),
                path=str(doc.get("path", "/")),
                model=doc.get("model") if isinstance(doc.get("model"), str) else None,
                body_sha256=str(doc.get("body_sha256", "")),
                body_bytes=int(doc.get("body_bytes") or 0),
                body=doc.get("body"),
            )
            continue
        ex = by_number.get(number)
        if ex is None:
            raise error(f"{where} belongs to exchange {number}, whose request is not recorded.")
        after = _num(doc, "after_s", where)
        if kind == "response":
            ex.status = int(_num(doc, "status", where))
            headers = doc.get("headers") or {}
            ex.headers = {str(k): str(v) for k, v in dict(headers).items()}
            ex.response_after_s = after
        elif kind == "chunk":
            if "data_b64" in doc:
                data = base64.b64decode(str(doc["data_b64"]))
            else:
                data = str(doc.get("data", "")).encode("utf-8")
            ex.chunks.append((after, data))
        elif kind == "end":
            ex.end_after_s = after
            ex.error = doc.get("error") if isinstance(doc.get("error"), str) else None
            ex.complete = True
    if header is None:
        raise error(f"the recording {p} is empty: it has no header line.")
    exchanges = sorted(by_number.values(), key=lambda ex: (ex.at, ex.number))
    return Recording(p, header, exchanges)
