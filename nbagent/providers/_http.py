"""What every HTTP wire format shares: the key, the base URL, the client, the one request path.

`HTTPProvider` holds the key (never shown), the base URL, its httpx clients, the limits. Every
request it makes goes through `request(method, url, ...)`: live streams (`_open`), batch calls
and whole-body reads (`read_json`) get the headers, the key kept out of what is shown, the
connect-and-first-byte deadline, the recorder and the typed errors from one place.

Failures come out typed:

* connect, DNS, TLS, reset before the response, no response within the idle timeout
  -> `TransportError`;
* a non-2xx answer -> `errors_http.error_from_response` (the body is read in bounded chunks);
* a body over `max_body_bytes`, one SSE event over `max_event_bytes`, a 2xx that is neither an
  event stream nor JSON -> `InvalidResponse`;
* no bytes for `idle_timeout` seconds mid-stream -> `TransportError` naming the seconds;
* the connection dying after the 200 -> `StreamInterrupted`.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from ..errors import ConfigError, InvalidResponse, ProviderError, ServerError
from ._base import ModelRequest, StreamPart
from ._client import LoopClients, check_api_key, check_base_url, key_fingerprint
from ._error_text import redact, request_id_from
from ._event_stream import EventStream
from ._http_errors import error_from_response
from ._limits import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_EVENT_BYTES,
    Limits,
    Sender,
    read_body,
    transport_error,
)
from ._parts import json_or_none
from ._recorded import sent
from ._server_wish import server_wish
from ._stream_ends import StreamEnds
from ._wire_format import WireFormat

if TYPE_CHECKING:
    from ..recording import Recorder


USER_AGENT = "nbagent/0.1"

_STREAM_HEADERS = {
    "content-type": "application/json",
    "accept": "text/event-stream",
    "cache-control": "no-store",
}


class HTTPProvider(StreamEnds, WireFormat):
    """What every HTTP wire format shares. A subclass names its public endpoint and provider
    in `default_base_url` and `default_name`, its request's endpoint (`url`, or its `_path`),
    implements `build_body(request)` (the JSON body) and names its `_reading` (a `Reading`: what
    an answer's events say, one handler per event type), which `read_events(es)` reads the
    answer's parts with; `stream` sends the one and reads with the other.

    The built-in formats' providers (`AnthropicProvider`, `OpenAIProvider`, ...) are made by
    `resolve_model` from a model string; build one yourself for a server of your own
    (`base_url=`), a key from elsewhere (`api_key=`) or an httpx client of yours (`client=`):
    the arguments are these.

    The key is never shown: not in the repr, an error, a recording or the attempt log. Each
    event loop gets its own httpx client (a client's connections belong to the loop that
    opened them); `aclose` closes the running loop's.

    Args:
        model: The model id sent on the wire ("claude-sonnet-4-5", "gpt-4o").
        api_key: The key, or None for a server that needs none (a local one).
        base_url: The endpoint; None for the provider's public one (`default_base_url`).
        client: An httpx client of yours to send through (it is left open); None for one
            made per event loop.
        connect_timeout: Seconds to connect before a `TransportError`.
        idle_timeout: Seconds the stream may stay silent before a `TransportError`.
        max_body_bytes: The most bytes an answer may have before an `InvalidResponse`.
        max_event_bytes: The most bytes one streamed event may have.
        extra_headers: More headers for every request (an organisation or project header).
        name: The provider's name in model strings and the attempt log; None for
            `default_name`.
        trust_end_marker: Read a stream that reaches its end marker (`data: [DONE]`,
            `message_stop`) with neither a finish reason nor a usage report before it as a
            complete answer. Off by default: that is how llama-cpp-python's server ends a
            stream it cut (`StreamInterrupted`, retried); turn it on for a server that ends
            every complete answer so.

    Attributes:
        default_base_url: The public endpoint of the format's provider.
        default_name: The provider's name.
        auth_header: The header the key travels in ("authorization").
        auth_prefix: What precedes the key in it ("Bearer ").
        recorder: Where every exchange is appended (`Agent(record=...)`), or None.
        model: The model id.
        name: The provider's name.
        base_url: The endpoint, checked.
        limits: The timeouts, the size caps and how a stream's end is read.
        refused_output_forms: The structured-output forms this server refused
            ("json_schema", "json_object"): `output_mode="auto"` learns them, so a later run
            starts with the form it takes.

    Raises:
        ConfigError: The model is empty, the key is not a string or holds spaces or control
            characters, a timeout or size is not a positive number, or `base_url` is not an
            http(s) URL.
    """

    name: str
    model: str
    default_base_url = ""
    default_name = ""
    auth_header = "authorization"  # how the key travels: Bearer by default
    auth_prefix = "Bearer "
    recorder: Recorder | None = None  # Agent(record=...): every exchange is appended to it

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        extra_headers: Mapping[str, str] | None = None,
        name: str | None = None,
        trust_end_marker: bool = False,
    ) -> None:
        base_url = self.default_base_url if base_url is None else base_url
        name = self.default_name if name is None else name
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("the model name is empty: pass the model id, e.g. 'gpt-4o'.")
        self.model = model
        self.name = name
        self.base_url = check_base_url(base_url)
        self._api_key = check_api_key(api_key)
        self.limits = Limits(
            connect_timeout, idle_timeout, max_body_bytes, max_event_bytes, trust_end_marker
        )
        self._extra_headers = dict(extra_headers or {})
        self.refused_output_forms: set[str] = set()
        self._client = LoopClients(client, self.limits, self.base_url)

    # -- secrets and repr ------------------------------------------------------------------

    @property
    def rate_key(self) -> tuple[str, str, str]:
        """(provider, endpoint, a fingerprint of the key): requests that share a provider's
        rate limit share this, so they can share one client-side limiter. Never the key."""
        return (self.name, self.base_url, key_fingerprint(self._api_key))

    @property
    def _secrets(self) -> tuple[str, ...]:
        return (self._api_key,) if self._api_key else ()

    @property
    def sender(self) -> Sender:
        """What reading this provider's responses needs of it: its name, limits and secrets."""
        return Sender(self.name, self.limits, self._secrets)

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"{type(self).__name__}(model={self.model!r}, name={self.name!r}, "
            f"base_url={self.base_url!r}, api_key={key})"
        )

    # -- client ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the client this provider created for the running loop.

        A client passed in stays open; clients of other loops are closed when those loops run
        `aclose` themselves.
        """
        await self._client.aclose()

    # -- request ---------------------------------------------------------------------------

    def encode(self, body: Any) -> bytes:
        """`body` as the JSON bytes of a request (UTF-8; `\\u`-escaped for a lone surrogate).

        Args:
            body: The request's body, made of plain JSON values.

        Returns:
            The encoded body.

        Raises:
            ConfigError: `body` holds what JSON cannot (an object, NaN, a circular reference).
        """
        try:
            try:
                return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in the text: send it \u-escaped
                return json.dumps(body, ensure_ascii=True, allow_nan=False).encode("ascii")
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"the request cannot be encoded as JSON ({exc}): "
                "pass options and tool schemas made of plain JSON values."
            ) from None

    def _headers(self) -> dict[str, str]:
        """The format's own headers: the key (in `auth_header`)."""
        return {self.auth_header: self.auth_prefix + self._api_key} if self._api_key else {}

    @contextlib.asynccontextmanager
    async def request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | AsyncIterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """Send one request and yield its 2xx response, its body not yet read.

        Every request of this provider goes through here: the headers (`user-agent`, the key,
        `extra_headers`, then `headers`), the recorder, the deadline for the connection and the
        response's first bytes (`connect_timeout + idle_timeout`; a streamed upload's writes are
        each under the idle timeout instead), and the typed errors: a transport failure is
        `TransportError`, a non-2xx answer the error its body and status classify as.

        Args:
            method: The HTTP method.
            url: The URL.
            content: The body: bytes, or an async iterable of them (a large upload).
            headers: More headers for this request.
            params: Query parameters; a None value is left out.

        Yields:
            The 2xx response, its body not yet read.

        Raises:
            TransportError: The connection failed or timed out.
            ProviderError: The answer is not a 2xx (the subclass its body and status classify
                it as, from `http_error`).
        """
        sent_headers = {"user-agent": USER_AGENT, "accept": "application/json"}
        sent_headers.update(headers or {})
        sent_headers.update(self._headers())
        sent_headers.update(self._extra_headers)
        limits = self.limits
        client = self._client.current()
        query = {k: v for k, v in (params or {}).items() if v is not None}
        built = client.build_request(
            method,
            url,
            content=content,
            headers=sent_headers,
            params=query or None,
            timeout=limits.httpx_timeout(),
        )
        deadline = limits.connect_timeout + limits.idle_timeout
        async with contextlib.AsyncExitStack() as stack:
            try:
                with anyio.fail_after(math.inf if isinstance(content, AsyncIterable) else deadline):
                    response = await stack.enter_async_context(
                        sent(client, built, self.recorder, self._secrets)
                    )
            except (httpx.HTTPError, OSError, TimeoutError) as exc:
                raise transport_error(exc, self.sender, after_response=False) from None
            if not 200 <= response.status_code < 300:
                raw = await read_body(response, self.sender)
                raise self.http_error(response.status_code, raw, response.headers)
            yield response

    async def read_json(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        content: bytes | AsyncIterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        max_bytes: int | None = None,
    ) -> tuple[dict[str, Any], float | None]:
        """One request whose answer is a whole JSON object (a batch API's calls).

        Args:
            method: The HTTP method.
            url: The URL.
            json_body: A body to send as JSON (it replaces `content`), or None.
            content: The body as bytes or an async iterable of them, when not `json_body`.
            headers: More headers for this request.
            params: Query parameters; a None value is left out.
            max_bytes: A cap for this answer other than `max_body_bytes`, or None.

        Returns:
            The object, and the wait in seconds the server asked for (None when it asked none).

        Raises:
            InvalidResponse: The answer is not a JSON object.
            ProviderError: The answer is an error, by its status or (even on a 2xx) its object.
            TransportError: The connection failed or timed out.
        """
        extra = dict(headers or {})
        if json_body is not None:
            content = self.encode(json_body)
            extra.setdefault("content-type", "application/json")
        async with self.request(method, url, content=content, headers=extra, params=params) as r:
            raw = await read_body(r, self.sender, cap=max_bytes)
            doc = self._json_answer(r, raw, "an answer that is not a JSON object")
            return doc, server_wish(r.headers)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Send `request` and read the answer as it streams.

        The body is the format's `build_body(request)`, posted to its `url`; the answer's events
        are read by its `read_events`. A format with another exchange overrides this.

        Args:
            request: The conversation, system prompt, tools and settings.

        Yields:
            Text, thinking and tool-call parts as they arrive, then one `Completed`.

        Raises:
            ProviderError: The subclass for what went wrong (`RateLimited`, `ServerError`,
                `StreamInterrupted`, ...), which `classify` turns into the action.
        """
        body = self.build_body(request)
        try:
            async with (
                self._open(self.url, self.encode(body)) as es,
                contextlib.aclosing(self.read_events(es)) as parts,
            ):
                async for part in parts:
                    yield part
        except ServerError as err:
            better = self._server_error(err, body)
            if better is err:
                raise
            raise better from None

    def _server_error(self, err: ServerError, body: dict[str, Any]) -> ProviderError:
        """What a 5xx answer to `body` means: the `ServerError` itself, unless the format
        knows better (Gemini's 500 for a request larger than the window)."""
        return err

    @contextlib.asynccontextmanager
    async def _open(self, url: str, content: bytes) -> AsyncIterator[EventStream]:
        """POST `content` to `url` and yield the event stream of a 2xx answer."""
        async with self.request("POST", url, content=content, headers=_STREAM_HEADERS) as r:
            ctype = r.headers.get("content-type", "").lower()
            if ctype and "text/event-stream" not in ctype:
                # a 2xx that is not an event stream: the error object inside it, else invalid
                raw = await read_body(r, self.sender)
                what = f"expected an event stream (text/event-stream) but got {ctype}"
                self._json_answer(r, raw, what)
                raise self._invalid_body(r, raw, what)
            yield EventStream(r, self.sender)

    def _json_answer(self, response: httpx.Response, raw: bytes, what: str) -> dict[str, Any]:
        """The JSON object of a 2xx answer (an empty body is an empty one); an error object
        inside it is raised as its typed error, a body that is no object as `InvalidResponse`
        saying it is `what`."""
        doc = json_or_none(raw) if raw.strip() else {}
        if not isinstance(doc, dict):
            raise self._invalid_body(response, raw, what)
        if doc.get("error") and response.status_code != 204:
            raise self.http_error(response.status_code, raw, response.headers)
        return doc

    def _invalid_body(self, response: httpx.Response, raw: bytes, what: str) -> InvalidResponse:
        """`InvalidResponse` for an answer whose body is not what it should be: `what` it is,
        then the body's start (the key redacted)."""
        snippet = redact(raw[:200].decode("utf-8", errors="replace"), self._secrets)
        return InvalidResponse(
            f"{what}: {snippet!r}",
            provider=self.name,
            status_code=response.status_code,
            request_id=request_id_from(response.headers, secrets=self._secrets),
        )

    def http_error(
        self, status: int, body: bytes | Any, headers: Mapping[str, str] | None = None
    ) -> ProviderError:
        """The typed error for an answer that is not a success (a format may refine it).

        Args:
            status: The HTTP status.
            body: The answer's body (bytes, or an already decoded JSON value).
            headers: The answer's headers (its request id, `Retry-After`), or None.

        Returns:
            The error its status and body classify as (`RateLimited`, ...), key redacted.
        """
        return error_from_response(
            self.name, status, body, headers or {}, secrets=self._secrets, model=self.model
        )
