"""Model providers: the Provider protocol, one provider per wire format (Anthropic Messages,
OpenAI Chat Completions and Responses, Gemini; Azure, OpenRouter, Ollama as variants), model
strings."""

from __future__ import annotations

from ._anthropic import AnthropicProvider
from ._azure import AzureChatProvider, AzureResponsesProvider
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
from ._gemini import GeminiProvider
from ._http import HTTPProvider
from ._http_errors import error_from_payload, error_from_response
from ._models import register_model, register_prefix, resolve_model
from ._openai_chat import OpenAIProvider
from ._openai_responses import ResponsesProvider

__all__ = [
    "AnthropicProvider",
    "AzureChatProvider",
    "AzureResponsesProvider",
    "Completed",
    "GeminiProvider",
    "HTTPProvider",
    "ModelRequest",
    "OpenAIProvider",
    "Provider",
    "ResponsesProvider",
    "StreamPart",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolSpec",
    "error_from_payload",
    "error_from_response",
    "register_model",
    "register_prefix",
    "resolve_model",
]
