"""The loopback mock provider: a real HTTP server on 127.0.0.1 in a background daemon thread."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any, TypeVar

from ..recording import Recorder, Recording
from ..recording._writer import recorder_for
from ._batches import DEFAULT_BATCH_DURATION_S, BatchStore, BatchViews, _seconds
from ._call import Call, Endpoint, Hangup
from ._emulate import Interrupts, check_emulate
from ._faults import Fault, FaultPlan, FaultRates
from ._listener import Listener
from ._ratelimit import RateLimit
from ._records import RequestRecord
from ._replay import Replayer
from ._reply import Responder, default_responder
from ._routes import RouteTable

RecordTarget = str | os.PathLike[str] | Recorder
Handler = Callable[[Call], None]
RouteSpec = Endpoint | tuple[str, str, Handler]
"""An added route: an `Endpoint`, or ``(method, pattern, handler)``."""
RequestHook = Callable[[Call, int], None]
ReplaySource = str | os.PathLike[str] | Recording


log = logging.getLogger("nbagent.mock")
DEFAULT_MAX_RECORDS = 1000
_S = TypeVar("_S", bound="Served")


class Served:
    """A server that is its own context manager: started as a ``with`` block begins, stopped
    as it ends (`MockServer`, and the classroom's room server)."""

    def start(self: _S) -> _S:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MockServer(BatchViews, Served):
    """A loopback server speaking the Anthropic Messages, OpenAI Chat Completions and Responses,
    and Gemini formats, found by path (see `_formats`).

    Anthropic clients use ``url`` as their base URL (endpoint ``url + "/v1/messages"``); OpenAI
    clients ``openai_base_url`` (``/v1/chat/completions``, ``/v1/responses``); Gemini clients
    ``url`` (``/v1beta/models/{model}:streamGenerateContent?alt=sse``); Azure clients ``url`` as
    their endpoint (``/openai/v1/...``, ``/openai/deployments/{d}/...``). Use it as a context
    manager, or call ``start()`` and ``stop()``; ``stop()`` is idempotent.

    It keeps the last ``max_records`` requests (parsed bodies included) in ``requests``, and
    counts the older ones it let go in ``dropped_requests``: the server behind ``Agent("demo")``
    lives as long as the kernel, and hours of prompting must not grow its memory.

    ``record=`` (a path or a `nbagent.recording.Recorder`) appends every model exchange it
    serves to a recording, as it happens. ``replay=`` (a recording's path, or a `Recording`)
    makes it answer with the recorded answers instead, in order, each chunk at its recorded
    offset divided by ``speed`` (``math.inf``: no waiting); a request that does not match the
    next recorded one (another path or model, or one too many) gets a 400 naming the
    difference. Faults, the rate limit and the responder do not apply to a replay.

    Args:
        faults: The fault script: one fault string ("500", "429:retry_after=2",
            "drop_after_tokens=20", ...) or `Fault` per model request, in order; then every request
            is fine (or draws from `fault_rates`).
        seed: Seeds the random faults.
        fault_rates: Random-fault probabilities, by fault string or `Fault` ({"500": 0.1, "429":
            0.05}); each request after the script draws one, or none.
        rate_limit: A token bucket every model request must pass (429s with the providers' rate-
            limit headers); None for none.
        context_window: Refuse prompts estimated above this many tokens with the format's context-
            overflow error; None for the format's usual window.
        demo_delay_s: Seconds to wait before each answer (to watch a widget in real time).
        port: The port to bind on 127.0.0.1; 0 for a free one.
        responder: What decides the answers; None for the default (the demo model).
        max_records: How many requests to keep in `requests` (0 or more).
        record: A path or a `Recorder`: every model exchange it serves is appended to a recording.
        replay: A recording's path or a `Recording`: answer with its recorded answers instead, in
            order.
        speed: How much faster than recorded a replay answers (`math.inf`: no waiting).
        batch_duration_s: How long a provider batch takes on the batch clock before it ends, in
            seconds (items end one by one over it).
        expire_after_s: Make each batch expire this many seconds after creation (the finished
            items kept, the rest expired); None for the providers' 24 hours.
        batch_clock: The clock batches are timed on (seconds); None for `time.time`. Move it
            with `advance_batches` so a test or a notebook waits for nothing.
        emulate: A server whose quirks the Chat Completions route takes on, or None for the
            API as documented: "llama-cpp-python" (`python -m llama_cpp.server`) cuts a running
            stream when another request arrives (its `interrupt_requests`: the chunks so far,
            `data: [DONE]`, a clean end), never sends a usage chunk, and refuses a
            `response_format` of type `json_schema` with HTTP 500 and FastAPI's validation
            error, while `json_object` with a `schema` is answered in that schema.
        routes: Routes to add, tried before the built-in ones (see `add_route`).
        on_request: Called as ``on_request(call, status)`` after each request is answered (the
            `Call`, with its method, path, params, query and headers; the status it was
            answered with, 0 for a closed connection); its exceptions are logged.
        host: The address to listen on (127.0.0.1 unless a caller such as a classroom
            means another network to reach it).

    Raises:
        ValueError: `max_records`, `context_window` or `demo_delay_s` is out of range, `emulate`
            names no known server, or a fault string does not parse (one sentence naming it).
        RecordingError: `record` or `replay` names a file that cannot be written or read.

    Attributes:
        plan: Which fault the next model request gets.
        rate_limit: The token bucket, or None.
        context_window: The window prompts are checked against, or None.
        demo_delay_s: Seconds waited before each answer.
        responder: What decides the answers.
        max_records: How many requests are kept.
        stopping: Set while the server stops (long answers end early).
        replayer: What answers from a recording, or None.
        recorder: Where exchanges are recorded, or None.
        emulate: The server emulated, or None.
        interrupts: The streams being written, for `emulate="llama-cpp-python"` to cut.
    """

    def __init__(
        self,
        faults: Sequence[str | Fault] = (),
        *,
        seed: int | None = None,
        fault_rates: FaultRates | None = None,
        rate_limit: RateLimit | None = None,
        context_window: int | None = None,
        demo_delay_s: float = 0.0,
        port: int = 0,
        responder: Responder | None = None,
        max_records: int = DEFAULT_MAX_RECORDS,
        record: RecordTarget | None = None,
        replay: ReplaySource | None = None,
        speed: float = 1.0,
        batch_duration_s: float = DEFAULT_BATCH_DURATION_S,
        expire_after_s: float | None = None,
        batch_clock: Callable[[], float] | None = None,
        emulate: str | None = None,
        routes: Sequence[RouteSpec] = (),
        on_request: RequestHook | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._host = host
        self.emulate = check_emulate(emulate)
        self.routes = RouteTable()
        for spec in routes:
            self.add_route(*spec) if isinstance(spec, tuple) else self.routes.extra.append(spec)
        self.on_request = on_request
        self.interrupts = Interrupts()
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 0:
            raise ValueError(
                f"max_records must be a whole number of requests to keep (0 or more), "
                f"got {max_records!r}."
            )
        if context_window is not None and context_window < 1:
            raise ValueError(
                f"context_window must be a positive number of tokens, got {context_window}."
            )
        self.plan = FaultPlan(faults, seed=seed, fault_rates=fault_rates)
        self.batch_store = BatchStore(
            duration_s=batch_duration_s,
            expire_after_s=expire_after_s,
            clock=batch_clock,
            seed=seed,
        )
        self.rate_limit = rate_limit
        self.context_window = context_window
        self.demo_delay_s = _seconds(
            demo_delay_s, "demo_delay_s must be a number of seconds (0 or more)"
        )
        self.responder: Responder = responder or default_responder()
        self._port = port
        self.max_records = max_records
        self._records: deque[RequestRecord] = deque(maxlen=max_records)
        self._received = 0  # requests recorded since start or clear_requests(), kept or not
        self._lock = threading.Lock()
        self._httpd: Listener | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()
        self.replayer = Replayer(replay, speed) if replay is not None else None
        made_by = "nbagent MockServer(record=...)"
        self.recorder = None if record is None else recorder_for(record, made_by)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> MockServer:
        """Bind 127.0.0.1 and serve in a daemon thread. Starting a running server does nothing.

        Returns:
            The server itself, so `server = MockServer().start()` reads well.
        """
        with self._lock:
            if self._httpd is not None:
                return self
            self.stopping.clear()
            httpd = Listener(self._port, self._answer, self._host)
            thread = threading.Thread(
                target=httpd.run,
                name=f"nbagent-mock-server-{httpd.server_address[1]}",
                daemon=True,
            )
            self._httpd, self._thread = httpd, thread
        thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, end open connections and close the port. Idempotent.

        Args:
            timeout: Seconds to wait for the serving thread and each open connection.
        """
        with self._lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
        if httpd is None:
            return
        self.stopping.set()
        self.interrupts.arrived()  # a stream waiting to be cut waits no more
        httpd.halt()
        if thread is not None:
            thread.join(timeout)
        httpd.close_connections(timeout)
        httpd.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        """Answer one request: one `Call`, through the route table, then the request hook."""
        call = Call(handler, self)
        broke: str | None = None
        try:
            self.routes.serve(call)
        except (Hangup, OSError):
            handler.close_connection = True
            broke = "the connection was closed"
        finally:
            if call.exchange is not None:
                call.exchange.end(error=broke)
        if self.on_request is not None:
            try:
                self.on_request(call, call.status)
            except Exception:
                log.exception("nbagent mock server: on_request failed on %s", call.path)

    @property
    def running(self) -> bool:
        """Whether it is serving."""
        return self._httpd is not None

    def __repr__(self) -> str:
        where = self.url if self.running else "stopped"
        return f"MockServer({where}, {self._received} requests)"

    # --- addresses ------------------------------------------------------------------------------

    def _listening(self) -> Listener:
        httpd = self._httpd
        if httpd is None:
            raise RuntimeError("The mock server is not running; call start() first.")
        return httpd

    @property
    def port(self) -> int:
        """The port it listens on (RuntimeError when it is not running)."""
        return int(self._listening().server_address[1])

    @property
    def host(self) -> str:
        """The address the listening socket is bound to (127.0.0.1 unless `host` said otherwise)."""
        return str(self._listening().socket.getsockname()[0])

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`: the base URL of Anthropic, Gemini and Azure clients."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_url(self) -> str:
        """The Messages endpoint."""
        return self.url + "/v1/messages"

    @property
    def openai_url(self) -> str:
        """The Chat Completions endpoint."""
        return self.url + "/v1/chat/completions"

    @property
    def openai_base_url(self) -> str:
        """The base URL of OpenAI clients (`.../v1`)."""
        return self.url + "/v1"

    @property
    def responses_url(self) -> str:
        """The Responses endpoint."""
        return self.url + "/v1/responses"

    def gemini_url(self, model: str = "demo") -> str:
        """Gemini's streaming endpoint for `model`.

        Args:
            model: The model named in the path.

        Returns:
            The URL.
        """
        return f"{self.url}/v1beta/models/{model}:streamGenerateContent?alt=sse"

    def add_route(self, method: str, pattern: str, handler: Handler, **options: Any) -> Endpoint:
        """Answer ``method`` requests whose path (without its query) matches ``pattern`` with
        ``handler(call)``, before the built-in routes; a running server takes it at once.

        Args:
            method: The HTTP method ("GET", "POST", "DELETE").
            pattern: A regular expression the whole path must match; its named groups are
                ``call.params``.
            handler: Reads the request from the `Call` and answers through it
                (``call.record(status)`` keeps it in `requests`; ``call.send(...)``,
                ``call.send_json(...)``, or ``call.head(...)``, ``call.chunk(...)`` and
                ``call.end()`` for a stream).
            **options: Further `Endpoint` fields (``format``, ``max_body``, ``when``, ...).

        Returns:
            The route added.
        """
        endpoint = Endpoint(method.upper(), pattern, handler, **options)
        self.routes.extra.append(endpoint)
        return endpoint

    # --- faults and records ---------------------------------------------------------------------

    def set_faults(self, faults: Sequence[str | Fault]) -> None:
        """Replace the fault script; the next model request gets its first entry.

        Args:
            faults: The new script (fault strings or `Fault`s).

        Raises:
            ValueError: A fault string does not parse.
        """
        self.plan.set_script(faults)

    def set_fault_rates(self, fault_rates: FaultRates | None, seed: int | None = None) -> None:
        """Replace the random-fault probabilities.

        Args:
            fault_rates: The new probabilities; None for no random faults.
            seed: Seeds the draws.

        Raises:
            ValueError: A rate is not a probability, or they add up to more than 1.
        """
        self.plan.set_rates(fault_rates, seed)

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the last ``max_records`` requests received, oldest first (each
        record's ``index`` counts every request since the start, kept or not)."""
        with self._lock:
            return list(self._records)

    @property
    def dropped_requests(self) -> int:
        """How many older records were let go to keep the window at ``max_records``."""
        with self._lock:
            return self._received - len(self._records)

    def clear_requests(self) -> None:
        """Forget the requests received (and restart their `index` at 0)."""
        with self._lock:
            self._records.clear()
            self._received = 0

    def record(self, **fields: Any) -> RequestRecord:
        """Keep one request (the handler calls it for each).

        Args:
            **fields: The `RequestRecord` fields but `index` and `received_at`.

        Returns:
            The record.
        """
        with self._lock:
            record = RequestRecord(index=self._received, received_at=time.time(), **fields)
            self._received += 1
            self._records.append(record)  # the deque lets the oldest go past max_records
            return record

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; return True early when the server is stopping.

        Args:
            seconds: How long.

        Returns:
            True when the server is stopping (the caller should end its answer).
        """
        return self.stopping.wait(seconds) if seconds > 0 else self.stopping.is_set()


serve = MockServer
"""Run a `MockServer` for the duration of a ``with`` block, taking exactly its arguments:
``with serve(["429", "ok"]) as server: ...``; the server starts as the block begins and stops
when it ends (a `MockServer` is its own context manager)."""


_shared: MockServer | None = None
_shared_lock = threading.Lock()


def shared_server() -> MockServer:
    """The process-wide default mock server (no faults), started on first use.

    Returns:
        The server, running on 127.0.0.1.
    """
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            _shared = MockServer().start()
        return _shared
