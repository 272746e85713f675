"""Which batch endpoint a request is for, and serving it: the one door from the request handler
into the batch emulation (`_batches`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from . import _anthropic_batches, _gemini_batches, _openai_batches
from ._batch_http import BatchCall, CallError, Endpoint, Hangup
from ._formats import CODECS

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from ._server import MockServer

log = logging.getLogger("nbagent.mock")
ENDPOINTS: tuple[Endpoint, ...] = (
    *_anthropic_batches.ENDPOINTS,
    *_openai_batches.ENDPOINTS,
    *_gemini_batches.ENDPOINTS,
)
_CODEC = {"anthropic": "anthropic", "openai": "openai", "azure": "openai", "gemini": "gemini"}


def find(
    method: str, path: str, headers: Mapping[str, str], mock: MockServer
) -> tuple[Endpoint, re.Match[str]] | None:
    """The batch endpoint ``method path`` calls, or None (not a batch endpoint).

    OpenAI's ``/v1/batches/{id}`` is also Gemini's (the genai SDK calls ``/v1/``): a request
    with Gemini's key header or ``?key=``, for a Gemini batch's id, or with Gemini's paging
    parameters is Gemini's.
    """
    bare, _, query = path.partition("?")
    found = [
        (endpoint, match)
        for endpoint in ENDPOINTS
        if endpoint.method == method and (match := endpoint.pattern.match(bare)) is not None
    ]
    if len(found) > 1:
        gemini = _looks_gemini(headers, query, found, mock)
        found = [f for f in found if (f[0].provider(f[1]) == "gemini") == gemini]
    return found[0] if found else None


def _looks_gemini(
    headers: Mapping[str, str],
    query: str,
    found: list[tuple[Endpoint, re.Match[str]]],
    mock: MockServer,
) -> bool:
    names = {name.lower() for name in headers}
    params = set(parse_qs(query))
    if "x-goog-api-key" in names or params & {"key", "pageSize", "pageToken"}:
        return True
    for endpoint, match in found:
        if endpoint.provider(match) == "gemini" and "id" in match.groupdict():
            return mock.batch_store.get("batches/" + match["id"], "gemini") is not None
    return False


def serve(handler: BaseHTTPRequestHandler, mock: MockServer) -> bool:
    """Serve the request if it is for a batch endpoint; False when it is not.

    Raises:
        Hangup: the connection is to be closed (a fault, or the client went away).
    """
    found = find(handler.command, handler.path, dict(handler.headers.items()), mock)
    if found is None:
        return False
    endpoint, match = found
    provider = endpoint.provider(match)
    call = BatchCall(handler, mock, endpoint, match, CODECS[_CODEC[provider]])  # type: ignore[index]
    if endpoint.target == "create":
        mock.batch_store.count_create(provider)
    if endpoint.target is not None:
        call.fault = mock.plan.next(endpoint.target)
    try:
        if not call.before():
            endpoint.serve(call)
    except CallError as err:
        call.error(err.status, err.body)
    except (Hangup, OSError):
        raise
    except Exception as err:  # a bug in the mock itself: answer 500 so it is seen, not hidden
        log.exception("nbagent mock server failed on %s %s", handler.command, handler.path)
        if call.started:
            call.hang_up(500)
        message = f"nbagent mock server internal error: {type(err).__name__}: {err}"
        call.error(500, call.codec.internal_error(message, call.request_id))
    return True
