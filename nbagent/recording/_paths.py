"""Which wire format a request speaks, read from its path as the real APIs route it.

| path | format |
|---|---|
| `.../messages` | Anthropic Messages |
| `.../chat/completions` (Azure's `/openai/deployments/{d}/...`, `/openai/v1/...`) | OpenAI Chat |
| `.../responses` (also Azure's) | OpenAI Responses |
| `.../models/{model}:streamGenerateContent` (`?alt=sse`), `:generateContent` | Gemini |

The one home of this table: the watcher reads an SDK's requests with it, and the mock server
(which imports nothing of nbagent but this stand-alone layer) can route with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

WireFormat = Literal["anthropic", "openai", "responses", "gemini"]
"""The four wire formats a model request may speak."""

_PATTERNS: tuple[tuple[WireFormat, str], ...] = (
    ("anthropic", r".*/messages/?"),
    ("openai", r".*/chat/completions/?"),
    ("responses", r".*/responses/?"),
    ("gemini", r".*/models/(?P<model>.+):(?P<method>streamGenerateContent|generateContent)"),
)


@dataclass(frozen=True)
class WirePath:
    """What a request's path says.

    Attributes:
        format: The wire format ("anthropic", "openai", "responses", "gemini").
        model: The model named in the path (Gemini), else "".
        stream: Whether the path asks for a stream (Gemini), else None (the body says).
        azure: Whether the request goes to Azure OpenAI: by its host when one is given (a
            resource's is `<name>.openai.azure.com`), else by the path's `/openai/` prefix.
    """

    format: WireFormat
    model: str = ""
    stream: bool | None = None
    azure: bool = False


def wire_path(path: str, host: str = "") -> WirePath | None:
    """The wire format a POST to `path` speaks, or None for a path of no model endpoint.

    Args:
        path: The request's path, with its query when it has one.
        host: The host it is sent to, or "" (a server reading its own requests).

    Returns:
        What the path says, or None.
    """
    bare, _, query = path.partition("?")
    for fmt, pattern in _PATTERNS:
        match = re.fullmatch(pattern, bare)
        if match is None:
            continue
        found = match.groupdict()
        if "model" not in found:
            azure = "openai.azure.com" in host if host else bare.startswith("/openai/")
            return WirePath(fmt, azure=azure)
        streamed = found["method"] == "streamGenerateContent" and "alt=sse" in query
        return WirePath(fmt, model=found["model"], stream=streamed)
    return None
