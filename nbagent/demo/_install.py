"""Plugging the demo model in: the model strings "demo" and "replay:<recording>", and the mock
server's default responder."""

from __future__ import annotations

from typing import Any

from ..mock import set_default_responder, shared_server
from ..providers import AnthropicProvider, Provider, register_model, register_prefix
from ._model import demo_reply
from ._replay import replay_provider

DEMO_API_KEY = "demo-key-not-secret"
"""What the demo provider sends as its key: the mock server checks that one is present."""


def _demo_provider(*, base_url: str | None = None, **options: Any) -> Provider:
    """The demo model: the Anthropic wire format against the loopback mock server (started on
    first use, on a free port of 127.0.0.1) unless `base_url` names another mock server."""
    url = base_url if base_url is not None else shared_server().url
    options.setdefault("name", "demo")
    provider = AnthropicProvider("demo", api_key=DEMO_API_KEY, base_url=url, **options)
    provider.outputs_named = "the demo model's native structured outputs (Anthropic's dialect)"
    provider.native_outputs = True
    return provider


def install() -> None:
    """Register the demo model; `import nbagent` calls this once."""
    set_default_responder(demo_reply)
    register_model("demo", _demo_provider, label="Demo model", free=True)
    register_prefix("replay", replay_provider)
