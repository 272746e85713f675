"""A watched copy of each kind of client, made through the seams the clients offer.

Stainless-built SDKs (anthropic, openai and Azure's): `client.with_options(http_client=...)`,
the documented way to give an SDK client another httpx client. google-genai: a new `Client`
with the same settings and `http_options.httpx_client` / `httpx_async_client`. httpx (and
httpx2, which the newer SDKs use) clients: a new client with the same settings. In each case the
new http client sends through the old one's transport, wrapped (`_transport`); the one private
attribute read is httpx's `_transport` / `_mounts`, as OpenTelemetry's httpx instrumentation
reads it, so a proxy or a custom transport the user set up keeps working. Nothing is patched:
the original client is left as it was and can still be used unwatched.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..errors import ConfigError
from ._transport import ObserverFactory, watching_transport

Outer = Callable[[ModuleType, Any, bool], Any]
"""Wraps a transport: (httpx module, transport, async) -> what the client sends through (the
guard's transport around a watched one; `wrap`'s watching one around a client's own)."""


def _http_module(obj: Any) -> ModuleType | None:
    for cls in type(obj).__mro__:
        top = getattr(cls, "__module__", "").partition(".")[0]
        if top in ("httpx", "httpx2"):
            return importlib.import_module(top)
    return None


def kind_of(client: Any) -> str:
    """anthropic, openai, genai or httpx; ConfigError for anything else."""
    top = type(client).__module__.partition(".")[0]
    if top in ("anthropic", "openai") and hasattr(client, "with_options"):
        return top
    if type(client).__module__.startswith("google.genai") and hasattr(client, "models"):
        return "genai"
    mod = _http_module(client)
    if mod is not None and isinstance(client, (mod.Client, mod.AsyncClient)):
        return "httpx"
    raise ConfigError(
        f"nbagent.watch cannot watch a {type(client).__name__}: give it an anthropic, openai or "
        "google-genai client, or an httpx client."
    )


def _rebuilt(http: Any, watched: Outer) -> Any:
    """A new client of `http`'s kind with its settings, sending through its transports, each
    `watched`."""
    mod = _http_module(http)
    assert mod is not None
    asynchronous = isinstance(http, mod.AsyncClient)
    mounts = {
        p.pattern: (None if t is None else watched(mod, t, asynchronous))
        for p, t in getattr(http, "_mounts", {}).items()
    }
    cls = mod.AsyncClient if asynchronous else mod.Client
    return cls(
        transport=watched(mod, http._transport, asynchronous),
        mounts=mounts,
        base_url=http.base_url,
        headers=http.headers,
        cookies=http.cookies,
        timeout=http.timeout,
        auth=http.auth,
        follow_redirects=http.follow_redirects,
        max_redirects=http.max_redirects,
        event_hooks=http.event_hooks,
        trust_env=http.trust_env,
    )


def _genai(client: Any, watched: Outer, retries: bool) -> Any:
    import httpx
    from google import genai

    api = client._api_client  # the settings the client was made with (read, never changed)
    options = api._http_options.model_copy()
    sync_http = options.httpx_client or httpx.Client()
    async_http = options.httpx_async_client or httpx.AsyncClient()
    options.httpx_client = _rebuilt(sync_http, watched)
    options.httpx_async_client = _rebuilt(async_http, watched)
    if not retries:
        options.retry_options = None  # the guard retries: the SDK's own retries are off
    kwargs: dict[str, Any] = {"http_options": options}
    if api.vertexai:
        kwargs.update(
            vertexai=True, project=api.project, location=api.location, credentials=api._credentials
        )
    else:
        kwargs["api_key"] = api.api_key
    return genai.Client(**kwargs)


def wrap(
    client: Any,
    observers: list[ObserverFactory],
    now: Callable[[], float],
    outer: Outer | None = None,
) -> Any:
    """The watched copy of `client`. With `outer` (a guard), every transport is wrapped in it
    as well and the SDK's own retries are turned off."""
    kind = kind_of(client)

    def watched(mod: ModuleType, transport: Any, asynchronous: bool) -> Any:
        w = watching_transport(mod, transport, observers, asynchronous=asynchronous, now=now)
        return w if outer is None else outer(mod, w, asynchronous)

    if kind in ("anthropic", "openai"):
        http = _rebuilt(client._client, watched)
        retries_off = {} if outer is None else {"max_retries": 0}
        return client.with_options(http_client=http, **retries_off)
    if kind == "genai":
        return _genai(client, watched, retries=outer is None)
    return _rebuilt(client, watched)


def base_url_of(client: Any) -> str:
    """The endpoint a client is set up for, without a trailing slash ("" for an httpx client
    without a base URL): with the provider and the key, what its requests share a limit by."""
    kind = kind_of(client)
    if kind == "genai":
        options = client._api_client._http_options
        url = options.base_url or "https://generativelanguage.googleapis.com"
        return str(url).rstrip("/")
    return str(client.base_url).rstrip("/")
