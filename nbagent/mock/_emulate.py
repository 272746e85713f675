"""Servers the mock can behave like where they part from the API they speak (`emulate=`).

`"llama-cpp-python"`: the Chat Completions route answers as llama-cpp-python's server
(`python -m llama_cpp.server`) does, read from its source (`llama_cpp/server/app.py`,
`errors.py`, `llama_types.py`) and from streams captured from it
(tests/fixtures/providers/llama-cpp-python__streams-complete-and-interrupted.json):

* `interrupt_requests`, on by default there: a model request that arrives while a stream is
  being written cuts that stream, which ends with the chunks so far, `data: [DONE]` and a clean
  end of the body: no finish_reason, no usage;
* no usage chunk, even when `stream_options.include_usage` asks for one;
* `response_format` goes through the server's pydantic model, whose `type` is `"text"` or
  `"json_object"` (with an optional `schema`, which becomes a grammar): a `"json_schema"` one
  fails it, and the route's error handler answers that exception as it answers every other,
  with HTTP 500 and `{"error": {"message": str(exc), "type": "internal_server_error",
  "param": null, "code": null}}`, the message being FastAPI's text for the validation error.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

EMULATIONS = ("llama-cpp-python",)
_TYPES = ("text", "json_object")


def check_emulate(value: str | None) -> str | None:
    """`value` when it names a server the mock can emulate (or is None); else `ValueError`."""
    if value is not None and value not in EMULATIONS:
        known = ", ".join(repr(e) for e in EMULATIONS)
        raise ValueError(f"emulate={value!r} names no server the mock knows; use {known} or None.")
    return value


def refused_response_format(body: Any) -> dict[str, Any] | None:
    """llama-cpp-python's answer (HTTP 500) to a body whose `response_format.type` its model
    does not allow; None for a body it takes."""
    fmt = body.get("response_format") if isinstance(body, dict) else None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if not isinstance(fmt, dict) or kind in _TYPES:
        return None
    expected = " or ".join(repr(t) for t in _TYPES)
    issue = {
        "type": "literal_error",
        "loc": ("body", "response_format", "type"),
        "msg": f"Input should be {expected}",
        "input": kind,
        "ctx": {"expected": expected},
    }
    message = f"1 validation error:\n  {issue}\n\n  Endpoint: POST /v1/chat/completions"
    error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
    return {"error": error}


class Interrupts:
    """`interrupt_requests`: a model request that arrives cuts every stream being written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[threading.Event] = set()

    def arrived(self) -> None:
        """A request reached the model (or the server stops): cut the running streams."""
        with self._lock:
            for cut in self._running:
                cut.set()

    @contextlib.contextmanager
    def streaming(self) -> Iterator[threading.Event]:
        """While a stream is written: the event that says it was cut."""
        cut = threading.Event()
        with self._lock:
            self._running.add(cut)
        try:
            yield cut
        finally:
            with self._lock:
                self._running.discard(cut)
