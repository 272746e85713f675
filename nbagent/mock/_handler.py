"""One HTTP exchange with the mock server: a `Call`, answered through the route table."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, cast

from ._call import Call, Hangup

if TYPE_CHECKING:
    from ..recording import Exchange
    from ._server import _HTTPServer

log = logging.getLogger("nbagent.mock")


class MockHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nbagent-mock/0.1"
    sys_version = ""
    timeout = 300
    disable_nagle_algorithm = True
    exchange: Exchange | None = None  # the exchange being recorded (MockServer(record=...))
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
        mock = cast("_HTTPServer", self.server).mock
        self.exchange = None
        call = Call(self, mock)
        broke: str | None = None
        try:
            mock.routes.serve(call)
        except (Hangup, OSError):
            self.close_connection = True
            broke = "the connection was closed"
        finally:
            if self.exchange is not None:
                self.exchange.end(error=broke)
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
        if self.exchange is not None:
            self._sent.append((keyword, value))

    def end_headers(self) -> None:
        super().end_headers()
        if self.exchange is not None:
            self.exchange.response(self._status_sent, self._sent)
