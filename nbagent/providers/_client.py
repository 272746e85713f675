"""The httpx side of a provider: its base URL checked, one client per event loop, TLS.

`check_base_url` says in one sentence what is wrong with an endpoint; `LoopClients` gives the
running loop's client (a client's connections belong to the loop that opened them: each
`asyncio.run` has its own, and a notebook mixes the kernel's loop with `run_sync`'s) and closes
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib
import ssl
import weakref
from urllib.parse import urlsplit

import httpx

from ..errors import ConfigError
from ._limits import Limits


def key_fingerprint(key: str | None) -> str:
    """A fingerprint of `key` ("" for none), never the key: what tells the rate budgets of two
    keys apart (`HTTPProvider.rate_key`, a guarded client's limiter)."""
    return hashlib.sha256(key.encode()).hexdigest()[:12] if key else ""


def at_openai(base_url: str) -> bool:
    """Whether `base_url` is OpenAI's own API (api.openai.com), not another server speaking
    its formats: what its field names and strict schemas are decided by."""
    return (urlsplit(base_url).hostname or "").lower() == "api.openai.com"


def check_base_url(base_url: str, *, what: str = "base_url") -> str:
    """`base_url` without a trailing slash; `ConfigError` unless it is http(s) with a host."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ConfigError(
            f"{what} is empty: pass an http(s) URL such as 'http://localhost:8080/v1'."
        )
    url = base_url.strip()
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # raises ValueError for a port that is not a number
    except ValueError:
        host = None
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        raise ConfigError(
            f"{what} {url!r} is not an http(s) URL with a host: "
            "write it like 'https://api.example.com/v1' or 'http://localhost:11434/v1'."
        )
    return url.rstrip("/")


def check_api_key(api_key: object) -> str | None:
    """The key, or None for none; `ConfigError` for one that is not a string or holds spaces
    or control characters (a stray newline pasted with it)."""
    if api_key is None:
        return None
    if not isinstance(api_key, str):
        raise ConfigError("api_key must be a string: pass the key text, or None.")
    if any(ord(c) < 33 or ord(c) == 127 for c in api_key):
        raise ConfigError(
            "the API key contains spaces or control characters: "
            "check it for a stray newline or space."
        )
    return api_key or None


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA bundle costs tens of milliseconds,
    which a notebook creating many agents (or `nbagent.map`) would otherwise pay per agent."""
    return httpx.create_ssl_context()


# httpx loads its transport (httpcore, h11, the anyio backend) when the first client is built
# and its first connection opens: a quarter of a second on a fresh process, which the first
# attempt's duration_s and ttft_s would show as if the server had been slow. A provider loads
# them when it is made, before any attempt is timed.
_TRANSPORT = (
    "httpcore",
    "h11",
    "httpcore._async.http11",
    "httpcore._backends.anyio",
    "anyio._backends._asyncio",
)


@functools.cache
def _load_transport() -> None:
    for module in _TRANSPORT:
        with contextlib.suppress(ImportError):  # a layout httpx does not use any more
            importlib.import_module(module)


class LoopClients:
    """The client a provider sends through: `given` (left open), or one made per event loop."""

    def __init__(self, given: httpx.AsyncClient | None, limits: Limits, base_url: str) -> None:
        self.given = given
        self.limits = limits
        self._owned: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        _load_transport()
        # plain http (a local server, the demo's mock) has no certificate to check; an https
        # endpoint's CA bundle is loaded now, not in the first attempt
        self._verify: ssl.SSLContext | bool = (
            _ssl_context() if given is None and base_url.startswith("https:") else False
        )

    def current(self) -> httpx.AsyncClient:
        """The running loop's client."""
        if self.given is not None:
            return self.given
        loop = asyncio.get_running_loop()
        client = self._owned.get(loop)
        if client is None:
            client = self._owned[loop] = httpx.AsyncClient(
                timeout=self.limits.httpx_timeout(), verify=self._verify
            )
        return client

    async def aclose(self) -> None:
        """Close the client made for the running loop (a given one stays open)."""
        client = self._owned.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
