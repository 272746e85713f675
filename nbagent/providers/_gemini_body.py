"""The body of a Gemini `streamGenerateContent` request, built from a `ModelRequest`.

The conversation becomes `contents` (`user` and `model` turns of parts), the system prompt the
`systemInstruction`, the tools `functionDeclarations` with their JSON Schema
(`parametersJsonSchema`, so schemas need no conversion), and `max_tokens` and the options the
`generationConfig`.

Thought signatures go back exactly where they came. The provider keeps each as a Gemini
`OpaqueBlock` right before the block whose part carried it, holding `{"thoughtSignature": ...}`
(merged here into that block's part); a part nbagent has no block for (an empty text part with a
signature, a signed thought, code execution) is kept whole and sent back as it came. Gemini 3
refuses a function-calling history whose calls lack signatures; calls made by another provider
(a fallback chain) get the documented stand-in `skip_thought_signature_validator`.
"""

from __future__ import annotations

import json
from typing import Any

from .._core._messages import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ._base import ModelRequest
from ._output_wire import OLD_GEMINI, add_gemini_output

GEMINI = "gemini"  # the provider name on Gemini's opaque blocks
SIGNATURE_STANDIN = "skip_thought_signature_validator"
# Request keys that stay at the top of the body; every other option goes to generationConfig.
_TOP_LEVEL = frozenset({"safetySettings", "toolConfig", "cachedContent", "labels"})
_RESERVED = frozenset({"contents", "systemInstruction", "tools", "model"})
IMAGE_TOKENS = 258  # what Gemini counts for an image of up to 384 px a side


def needs_signatures(model: str) -> bool:
    """Gemini 3 and later validate thought signatures on function calls; 1.x and 2.x do not
    (and might not take a stand-in)."""
    return not OLD_GEMINI.search(model)


def _tool_names(messages: tuple[Message, ...]) -> dict[str, str]:
    return {b.id: b.name for m in messages for b in m.blocks if isinstance(b, ToolUseBlock)}


def _inline(block: ImageBlock) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block.media_type, "data": block.data}}


def _user_parts(message: Message, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    for b in message.blocks:
        if isinstance(b, ToolResultBlock):
            key = "error" if b.is_error else "output"
            response = {
                "id": b.tool_use_id,
                "name": names.get(b.tool_use_id, "tool"),
                "response": {key: b.text},
            }
            parts.append({"functionResponse": response})
            extra.extend(_inline(p) for p in b.content if isinstance(p, ImageBlock))
        elif isinstance(b, TextBlock) and b.text:
            parts.append({"text": b.text})
        elif isinstance(b, ImageBlock):
            parts.append(_inline(b))
    return parts + extra  # function responses first, in call order


def _model_parts(message: Message, *, standin: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    # a message Gemini wrote carries its own signatures; one from another provider gets the
    # stand-in on its first call
    signed_call = any(isinstance(b, OpaqueBlock) and b.provider == GEMINI for b in message.blocks)
    for b in message.blocks:
        if isinstance(b, OpaqueBlock):
            if b.provider != GEMINI:
                continue
            if set(b.data) == {"thoughtSignature"}:
                signature = str(b.data["thoughtSignature"])
            else:
                parts.append(dict(b.data))  # a whole part, as it came
            continue
        if isinstance(b, TextBlock) and b.text:
            part: dict[str, Any] = {"text": b.text}
        elif isinstance(b, ToolUseBlock):
            call = {"id": b.id, "name": b.name, "args": b.input}
            part = {"functionCall": call}
            if signature is None and standin and not signed_call:
                signature = SIGNATURE_STANDIN  # a call from another provider
            signed_call = True
        elif isinstance(b, ImageBlock):
            part = _inline(b)
        else:
            continue  # thinking (Gemini needs only its signatures back), other providers' state
        if signature is not None:
            part["thoughtSignature"] = signature
            signature = None
        parts.append(part)
    if signature is not None:  # a signature whose block is gone: send it on an empty part
        parts.append({"text": "", "thoughtSignature": signature})
    return parts


def build_gemini_body(model: str, request: ModelRequest) -> dict[str, Any]:
    """The JSON body of a `streamGenerateContent` request."""
    names = _tool_names(request.messages)
    standin = needs_signatures(model)
    contents: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "assistant":
            parts = _model_parts(m, standin=standin)
            role = "model"
        else:
            parts = _user_parts(m, names)
            role = "user"
        if parts:
            contents.append({"role": role, "parts": parts})
    body: dict[str, Any] = {"contents": contents}
    config: dict[str, Any] = {}
    for key, value in request.options.items():
        if key in _RESERVED:
            continue
        if key in _TOP_LEVEL:
            body[key] = value
        elif key == "generationConfig" and isinstance(value, dict):
            config.update(value)
        else:
            config[key] = value
    config.setdefault("maxOutputTokens", request.max_tokens)
    body["generationConfig"] = config
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.input_schema}
            for t in request.tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
    add_gemini_output(body, request.output)
    return body


def estimate_request_tokens(body: dict[str, Any]) -> int:
    """About how many tokens a request holds (four characters a token, a flat count per image):
    enough to tell a 500 caused by an oversized input from an ordinary one."""
    chars = 0
    images = 0

    def walk(value: Any) -> None:
        nonlocal chars, images
        if isinstance(value, dict):
            if "inlineData" in value:
                images += 1
                return
            for k, v in value.items():
                if k != "thoughtSignature":
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            chars += len(value)
        else:
            chars += len(json.dumps(value, default=str))

    walk({k: v for k, v in body.items() if k != "generationConfig"})
    return chars // 4 + images * IMAGE_TOKENS
