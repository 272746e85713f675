"""A watched client's exchanges into a recording (`nbagent.watch(client, record=...)`).

One more observer of the watching transport: each request becomes an exchange of the
`nbagent.recording` file, its status, kept headers and body chunks written as the client reads
them. The request's auth headers are never written (the recorder keeps none of a request's
headers); the keys they carry are passed on only so that a server reflecting one into a body or
a kept header has it masked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..recording import Exchange as RecordedExchange
from ..recording import Recorder
from ._reading import request_body, request_secrets
from ._transport import StreamClosed


@dataclass(slots=True)
class _Exchange:
    _ex: RecordedExchange

    def response(self, status: int, headers: Any, t: float) -> None:
        self._ex.response(status, list(headers.multi_items()))

    def chunk(self, data: bytes, t: float) -> None:
        self._ex.chunk(data)

    def end(self, error: BaseException | None, t: float) -> None:
        closed_early = error is None or isinstance(error, StreamClosed)
        self._ex.end(error=None if closed_early else type(error).__name__)


@dataclass
class RecordingObserver:
    """The observer factory: called with each request as it is sent."""

    recorder: Recorder

    def __call__(self, request: Any, t: float) -> _Exchange:
        ex = self.recorder.exchange(
            request.method,
            str(request.url),
            None,
            request_body(request),
            secrets=request_secrets(request),
        )
        return _Exchange(ex)
