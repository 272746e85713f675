"""Model providers: the Provider protocol, Anthropic and OpenAI-format providers, model strings."""

from __future__ import annotations

from .anthropic import AnthropicProvider
from .base import (
    Completed,
    ModelRequest,
    Provider,
    StreamPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolSpec,
)
from .errors_http import error_from_payload, error_from_response
from .models import resolve_model
from .openai import OpenAIProvider
from .sse import HTTPProvider

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
    "resolve_model",
]
