"""Model providers: the Provider protocol, Anthropic and OpenAI-format providers, model strings."""

from __future__ import annotations

from ._anthropic import AnthropicProvider
from ._base import (
    Completed,
    ModelRequest,
    Provider,
    StreamPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolSpec,
)
from ._http import HTTPProvider
from ._http_errors import error_from_payload, error_from_response
from ._models import register_model, resolve_model
from ._openai_chat import OpenAIProvider

__all__ = [
    "AnthropicProvider",
    "Completed",
    "HTTPProvider",
    "ModelRequest",
    "OpenAIProvider",
    "Provider",
    "StreamPart",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolSpec",
    "error_from_payload",
    "error_from_response",
    "register_model",
    "resolve_model",
]
