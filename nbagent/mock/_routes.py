"""The mock server's route table: method and path pattern to the function answering a `Call`.

Every endpoint is a row (an `Endpoint`): the model endpoints (`_model_endpoint`), the batch
endpoints of the three batch APIs, ``GET /health``, and the rows a caller adds
(``MockServer(routes=...)``, `MockServer.add_route`), which are tried first. A request no row
takes is a 404 in the wire format its headers or path suggest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from . import _anthropic_batches, _gemini_batches, _openai_batches
from ._call import MAX_BODY, Call, CallError, Endpoint, Hangup
from ._conversation import Format, RequestError
from ._fault_answers import status_fault
from ._formats import CODECS, route
from ._model_endpoint import read_model_body, serve_model, serve_replay

log = logging.getLogger("nbagent.mock")


def _health(call: Call) -> None:
    call.record(200)
    call.send(200, b"ok", "text/plain; charset=utf-8", {})


def _not_found(call: Call) -> None:
    if call.method == "POST":
        read_model_body(call)
    call.error(404, call.codec.not_found(call.path, call.request_id))


def _speaks(fmt: Format) -> Callable[[Call], bool]:
    """Whether a call's path is `fmt`'s model endpoint, as `route` (the recordings' one table of
    paths) reads it."""
    return lambda call: fmt == getattr(route(call.path), "format", None)


MODEL_ENDPOINTS = tuple(
    Endpoint("POST", ".*", serve_model, c.name, max_body=MAX_BODY, model=True, when=_speaks(c.name))
    for c in CODECS.values()
)


class RouteTable:
    """The rows a mock server answers, the added ones first."""

    def __init__(self) -> None:
        self.extra: list[Endpoint] = []  # the added rows (`MockServer.add_route`)
        self.builtin = [
            *_gemini_batches.ENDPOINTS,  # before OpenAI's: it shares /v1/batches (`when`)
            *_anthropic_batches.ENDPOINTS,
            *_openai_batches.ENDPOINTS,
            *MODEL_ENDPOINTS,
            Endpoint("GET", "/health/?", _health),
        ]

    def find(self, call: Call) -> Endpoint | None:
        """Aim `call` at the first row that takes it; None (and no row) when none does."""
        for endpoint in (*self.extra, *self.builtin):
            if endpoint.method != call.method:
                continue
            match = endpoint.regex.fullmatch(call.bare)
            if match is None:
                continue
            call.bind(endpoint, match.groupdict())
            if endpoint.when is None or endpoint.when(call):
                return endpoint
        call.bind(None, {})
        return None

    def serve(self, call: Call) -> None:
        """Answer `call`: the row's function, after its endpoint fault; a refusal (`CallError`,
        or a `RequestError` of the body, a 400) as its error body; a bug in the mock as a 500, so
        it is seen, not hidden."""
        try:
            self._serve(call, self.find(call))
        except CallError as err:
            call.error(err.status, err.body)
        except RequestError as err:  # a body the endpoint's wire format refuses
            call.error(400, call.codec.error_body(400, err.message, call.request_id, err.param))
        except (Hangup, OSError):
            raise
        except Exception as err:
            log.exception("nbagent mock server failed on %s %s", call.method, call.path)
            call.handler.close_connection = True
            if call.started:
                call.hang_up(500)
            message = f"nbagent mock server internal error: {type(err).__name__}: {err}"
            call.error(500, call.codec.error_body(500, message, call.request_id))

    def _serve(self, call: Call, endpoint: Endpoint | None) -> None:
        mock = call.mock
        replaying = mock.replayer is not None and call.method == "POST"
        if replaying and (endpoint is None or endpoint.model):
            serve_replay(call)
            return
        if endpoint is None:
            _not_found(call)
            return
        if endpoint.target is not None:
            if endpoint.target == "create" and call.provider is not None:
                mock.batch_store.count_create(call.provider)
            call.fault = mock.plan.next(endpoint.target)
            if call.fault.kind == "close":
                call.hang_up()
            if status_fault(call, call.fault):
                return
        endpoint.serve(call)
