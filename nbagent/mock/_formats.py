"""The wire formats the mock server speaks, each a `Codec`, found by path as the real APIs do:
by the recordings' one table of paths (`nbagent.recording._paths.wire_path`, which `route` is),
which the mock's model endpoints read."""

from __future__ import annotations

from typing import Any

from ..recording._paths import wire_path
from ._anthropic_wire import ANTHROPIC
from ._codec import Codec, Route
from ._conversation import Conversation, Format
from ._gemini_wire import GEMINI
from ._openai_wire import OPENAI
from ._request_parsers import PARSERS, Reading
from ._responses_wire import RESPONSES

CODECS: dict[Format, Codec] = {c.name: c for c in (ANTHROPIC, OPENAI, RESPONSES, GEMINI)}


route = wire_path
"""The format a POST to a path speaks (`Route`), or None for a path the mock does not serve
(it answers 404): the recordings' one table of paths, shared with the mock's model endpoints."""


def parse_request(fmt: Format, body: Any, route_: Route | None = None) -> Conversation:
    """The neutral conversation of a request body in format `fmt`.

    Args:
        fmt: The wire format.
        body: The decoded JSON body.
        route_: The route (for Gemini's model and streaming, named in the path).

    Returns:
        The conversation.
    """
    model = fmt if fmt == "gemini" else ""  # Gemini's path names its model, the others' bodies
    return PARSERS[fmt](Reading(body, route_ or Route(fmt, model=model, stream=True)))


def guess_codec(headers: dict[str, str], path: str) -> Codec:
    """The wire format to answer a request no endpoint took (or a replay refused) in."""
    if "anthropic-version" in headers or "x-api-key" in headers:
        return ANTHROPIC
    if "x-goog-api-key" in headers:
        return GEMINI
    found = route(path)
    return CODECS[found.format if found else "openai"]
