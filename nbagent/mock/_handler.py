"""One HTTP exchange with the mock server: a `Call`, answered through the route table."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol, cast

from ._call import Call, Hangup, Server

log = logging.getLogger("nbagent.mock")


class _Serving(Protocol):
    mock: Server


class MockHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nbagent-mock/0.1"
    sys_version = ""
    timeout = 300
    disable_nagle_algorithm = True
    call: Call | None = None  # the request being answered
    _status_sent: int = 0
    _sent: list[tuple[str, str]]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the request log is ``MockServer.requests``

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        mock = cast("_Serving", self.server).mock
        self.call = call = Call(self, mock)
        broke: str | None = None
        try:
            mock.routes.serve(call)
        except (Hangup, OSError):
            self.close_connection = True
            broke = "the connection was closed"
        finally:
            if call.exchange is not None:
                call.exchange.end(error=broke)
        hook = mock.on_request
        if hook is not None:
            try:
                hook(call, call.status)
            except Exception:
                log.exception("nbagent mock server: on_request failed on %s", self.path)

    # --- what is sent, for MockServer(record=...) ----------------------------------------------

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status_sent, self._sent = code, []
        super().send_response(code, message)

    def send_header(self, keyword: str, value: str) -> None:
        super().send_header(keyword, value)
        if self.call is not None and self.call.exchange is not None:
            self._sent.append((keyword, value))

    def end_headers(self) -> None:
        super().end_headers()
        if self.call is not None and self.call.exchange is not None:
            self.call.exchange.response(self._status_sent, self._sent)
