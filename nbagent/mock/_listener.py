"""The mock server's HTTP plumbing: the listening socket (a threaded HTTP server that tracks its
connections, so stopping the mock ends them all) and the request handler, which hands every
request to the server's ``answer`` (`MockServer._answer`)."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast


class MockHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nbagent-mock/0.1"
    sys_version = ""
    timeout = 300
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the request log is ``MockServer.requests``

    def _dispatch(self) -> None:
        cast("Listener", self.server).answer(self)

    do_GET = do_POST = do_DELETE = _dispatch  # every method goes to the server's answer


class Listener(ThreadingHTTPServer):
    """Threaded server that tracks its connections so ``stop()`` can end them all."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(
        self, port: int, answer: Callable[[BaseHTTPRequestHandler], None], host: str = "127.0.0.1"
    ) -> None:
        self.answer = answer
        self._conn_lock = threading.Lock()
        self._connections: dict[threading.Thread, socket.socket] = {}
        self._halt = False
        self._wake_r, self._wake_w = socket.socketpair()
        try:
            super().__init__((host, port), MockHandler)
        except BaseException:
            self._wake_r.close()
            self._wake_w.close()
            raise

    def run(self) -> None:
        """Accept connections until ``halt()``; blocks without polling while idle."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._halt:
                for key, _ in selector.select():
                    if key.fileobj is self.socket and not self._halt:
                        self.handle_request()

    def halt(self) -> None:
        self._halt = True
        with suppress(OSError):
            self._wake_w.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"nbagent-mock-conn-{self.server_address[1]}",
            daemon=True,
        )
        with self._conn_lock:
            self._connections[thread] = request
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._connections.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-response is not an error worth printing

    def close_connections(self, timeout: float) -> None:
        with self._conn_lock:
            connections = dict(self._connections)
        for sock in connections.values():
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))
