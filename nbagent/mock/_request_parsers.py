"""The request parsers of the four wire formats (Anthropic Messages, OpenAI Chat, Gemini, OpenAI
Responses): each reads a request body into one `Conversation`, counting its prompt as it goes,
and says what is wrong with a body in the format's own words (`RequestError`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from ._conversation import (
    ENCRYPTED,
    SIGNATURE_STANDIN,
    Block,
    Conversation,
    RequestError,
    Text,
    ToolResult,
    ToolUse,
    Turn,
    _dumps,
    encrypted_for,
    estimate_tokens,
    sign,
)
from ._output_request import (
    anthropic_output,
    gemini_callable,
    gemini_output,
    openai_output,
    responses_output,
)

_ERROR_PREFIXES = ("error", "exception", "traceback", "tool error", "failed", "invalid")


class _Counter:
    """What a request parser has counted of the prompt: its characters and its images."""

    def __init__(self) -> None:
        self.chars = 0
        self.images = 0
        self.tools: dict[str, dict[str, Any]] = {}  # the tools to call: name -> JSON Schema

    def offer(self, tool: dict[str, Any], name: str, schema: Any) -> None:
        """Keep a tool the request offers, by `name`, with its `schema` ({} unless it is one);
        its declaration's JSON is prompt."""
        self.tools[name] = schema if isinstance(schema, dict) else {}
        self.add(_dumps(tool))

    def add(self, text: str) -> str:
        self.chars += len(text)
        return text

    def counted(
        self, body: dict[str, Any], output: tuple[dict[str, Any] | None, str | None], **fields: Any
    ) -> Conversation:
        """The `Conversation` of `fields` with its tools, its prompt's estimated size and the
        structured answer it asks for (`output`: the schema and the forced tool; the schema is
        prompt tokens, as providers bill it); a stream as the body's `stream` says, with its
        usage, unless `fields` say otherwise."""
        schema, forced = output
        if schema is not None:
            self.add(_dumps(schema))
        asked = {"stream": bool(body.get("stream", False)), "include_usage": True, **fields}
        return Conversation(
            **asked,
            tools=self.tools,
            prompt_tokens=max(1, estimate_tokens(self.chars, self.images)),
            output_schema=schema,
            forced_tool=forced,
        )


def _require_list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestError(f"{param}: Input should be a valid list", param)
    return value


def _require_dict(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(f"{param}: Input should be a valid dictionary", param)
    return value


def _dicts(value: Any, param: str, index: str = ".{}") -> Iterator[tuple[str, dict[str, Any]]]:
    """The items of the list `value` (the request's `param`), each a dictionary, with its place
    (`param` and its `index`, spelt as the format's errors spell it)."""
    for i, raw in enumerate(_require_list(value, param)):
        place = param + index.format(i)
        yield place, _require_dict(raw, place)


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("model: Field required", "model")
    return model


def _max_tokens(body: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RequestError(f"{key}: Input should be a positive integer", key)
        return value
    return None


def _looks_like_error(text: str) -> bool:
    head = text.lstrip().lower()
    return head.startswith((*_ERROR_PREFIXES, '{"error"')) or '"is_error": true' in head


def _content_text(
    content: Any, counter: _Counter, param: str, *, images: tuple[str, ...], others: bool
) -> str:
    """The text of a content field that is a string or a list of typed parts: text parts joined
    by newlines, the `images` kinds counted as images, any other part counted as its JSON when
    `others` (the format's token count includes it)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return counter.add(content)
    parts: list[str] = []
    for _, part in _dicts(content, param):
        kind = part.get("type")
        if kind == "text":
            parts.append(counter.add(str(part.get("text", ""))))
        elif kind in images:
            counter.images += 1
        elif others:
            counter.add(_dumps(part))
    return "\n".join(parts)


# --- Anthropic Messages -------------------------------------------------------------------------


def _anthropic_text(content: Any, counter: _Counter, param: str) -> str:
    """Text of a tool_result's content (or a system prompt): a string or text/image blocks."""
    return _content_text(content, counter, param, images=("image", "document"), others=False)


def _anthropic_blocks(content: Any, counter: _Counter, param: str) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (Text(counter.add(content)),)
    blocks: list[Block] = []
    for where, block in _dicts(content, f"{param}.content"):
        kind = block.get("type")
        if kind == "text":
            blocks.append(Text(counter.add(str(block.get("text", "")))))
        elif kind in ("thinking", "redacted_thinking"):
            counter.add(str(block.get("thinking", block.get("data", ""))))
        elif kind in ("tool_use", "server_tool_use"):
            arguments = _dumps(block.get("input", {}))
            name = counter.add(str(block.get("name", "")))
            blocks.append(ToolUse(str(block.get("id", "")), name, counter.add(arguments)))
        elif kind == "tool_result":
            text = _anthropic_text(block.get("content"), counter, f"{where}.content")
            is_error = bool(block.get("is_error", False))
            blocks.append(ToolResult(str(block.get("tool_use_id", "")), text, is_error))
        elif kind in ("image", "document"):
            counter.images += 1
        elif kind is None:
            raise RequestError(f"{where}.type: Field required", f"{where}.type")
        else:
            counter.add(_dumps(block))
    return tuple(blocks)


def parse_anthropic(body: Any) -> Conversation:
    body = _require_dict(body, "body")
    counter = _Counter()
    model = _model(body)
    max_tokens = _max_tokens(body, "max_tokens")
    if max_tokens is None:
        raise RequestError("max_tokens: Field required", "max_tokens")
    system_text = _anthropic_text(body.get("system") or "", counter, "system")
    turns: list[Turn] = []
    for where, message in _dicts(body.get("messages"), "messages"):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise RequestError(
                f"{where}.role: Input should be 'user' or 'assistant'", f"{where}.role"
            )
        turns.append(Turn(role, _anthropic_blocks(message.get("content", ""), counter, where)))
    for where, tool in _dicts(body.get("tools") or [], "tools"):
        name = tool.get("name")
        if not isinstance(name, str):
            raise RequestError(f"{where}.name: Field required", f"{where}.name")
        counter.offer(tool, name, tool.get("input_schema"))
    thinking = body.get("thinking")
    wants_thinking = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    return counter.counted(
        body,
        anthropic_output(body),
        format="anthropic",
        model=model,
        system=system_text,
        turns=tuple(turns),
        thinking=wants_thinking,
        max_tokens=max_tokens,
    )


# --- OpenAI Chat Completions --------------------------------------------------------------------


def _openai_content(content: Any, counter: _Counter, param: str) -> str:
    """Text of a message's content: a string or parts (an unknown part counts as its JSON)."""
    images = ("image_url", "input_image", "image")
    return _content_text(content, counter, param, images=images, others=True)


def _append(turns: list[Turn], role: Literal["user", "assistant"], blocks: list[Block]) -> None:
    if turns and turns[-1].role == role and role == "user" and turns[-1].tool_results:
        turns[-1] = Turn(role, turns[-1].blocks + tuple(blocks))
    else:
        turns.append(Turn(role, tuple(blocks)))


def parse_openai(body: Any) -> Conversation:
    body = _require_dict(body, "body")
    counter = _Counter()
    model = _model(body)
    max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
    system_parts: list[str] = []
    turns: list[Turn] = []
    for where, message in _dicts(body.get("messages"), "messages", ".[{}]"):
        role = message.get("role")
        text = _openai_content(message.get("content"), counter, where)
        if role in ("system", "developer"):
            system_parts.append(text)
        elif role == "user":
            turns.append(Turn("user", (Text(text),)))
        elif role == "assistant":
            blocks: list[Block] = [Text(text)] if text else []
            for j, call in enumerate(_require_list(message.get("tool_calls") or [], where)):
                call = _require_dict(call, f"{where}.tool_calls.[{j}]")
                function = _require_dict(call.get("function", {}), f"{where}.tool_calls.[{j}]")
                name = counter.add(str(function.get("name", "")))
                arguments = counter.add(str(function.get("arguments", "")))
                blocks.append(ToolUse(str(call.get("id", "")), name, arguments))
            turns.append(Turn("assistant", tuple(blocks)))
        elif role == "tool":
            result = ToolResult(str(message.get("tool_call_id", "")), text, _looks_like_error(text))
            _append(turns, "user", [result])
        else:
            raise RequestError(f"Invalid value for '{where}.role': '{role}'.", f"{where}.role")
    for i, raw in enumerate(_require_list(body.get("tools") or [], "tools")):
        tool = _require_dict(raw, f"tools.[{i}]")
        function = _require_dict(tool.get("function"), f"tools.[{i}].function")
        tool_name = function.get("name")
        if not isinstance(tool_name, str):
            raise RequestError(f"Missing required parameter: 'tools[{i}].function.name'.", "tools")
        counter.offer(tool, tool_name, function.get("parameters"))
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return counter.counted(
        body,
        openai_output(body),
        format="openai",
        model=model,
        system="\n".join(system_parts),
        turns=tuple(turns),
        include_usage=include_usage,
        max_tokens=max_tokens,
    )


# --- Gemini generateContent ---------------------------------------------------------------------


def _check_signature(part: dict[str, Any], call: dict[str, Any], where: str) -> None:
    signature = part.get("thoughtSignature")
    name = str(call.get("name", ""))
    if signature is None:
        raise RequestError(
            "Function call is missing a thought_signature in functionCall parts. This is "
            "required for tools to work correctly, and missing thought_signature may lead to "
            f"degraded model performance. Additional data, function call `{name}` , "
            f"position {where}.",
            where,
        )
    if signature != SIGNATURE_STANDIN and signature != sign(name, call.get("args") or {}):
        raise RequestError("Corrupted thought signature.", where)


def _parts(content: Any, counter: _Counter, where: str, role: str) -> tuple[Block, ...]:
    blocks: list[Block] = []
    signed = False
    for place, part in _dicts(content.get("parts", []), f"{where}.parts", "[{}]"):
        call = part.get("functionCall")
        response = part.get("functionResponse")
        if isinstance(call, dict):
            if role == "model" and not signed:
                _check_signature(part, call, place)
                signed = True
            name = counter.add(str(call.get("name", "")))
            args = counter.add(_dumps(call.get("args") or {}))
            blocks.append(ToolUse(str(call.get("id") or name), name, args))
        elif isinstance(response, dict):
            body = response.get("response")
            body = body if isinstance(body, dict) else {}
            is_error = "error" in body and "output" not in body
            value = body.get("error") if is_error else body.get("output", body.get("result", body))
            text = value if isinstance(value, str) else _dumps(value)
            call_id = str(response.get("id") or response.get("name") or "")
            blocks.append(ToolResult(call_id, counter.add(text), is_error))
        elif isinstance(part.get("text"), str):
            if part.get("thought") is not True:
                blocks.append(Text(counter.add(part["text"])))
        elif "inlineData" in part or "fileData" in part:
            counter.images += 1
    return tuple(blocks)


def parse_gemini(body: Any, model: str, *, stream: bool) -> Conversation:
    """A `generateContent` request (the model comes from the path) as a neutral conversation."""
    body = _require_dict(body, "body")
    counter = _Counter()
    turns: list[Turn] = []
    for where, content in _dicts(body.get("contents"), "contents", "[{}]"):
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise RequestError(
                f"Please use a valid role: user, model (got {role!r}).", f"{where}.role"
            )
        blocks = _parts(content, counter, where, role)
        turns.append(Turn("assistant" if role == "model" else "user", blocks))
    system = ""
    instruction = body.get("systemInstruction")
    if isinstance(instruction, dict):
        texts = [p.get("text", "") for p in instruction.get("parts", []) if isinstance(p, dict)]
        system = counter.add("\n".join(str(t) for t in texts))
    for group in _require_list(body.get("tools") or [], "tools"):
        for decl in _require_dict(group, "tools").get("functionDeclarations") or []:
            decl = _require_dict(decl, "tools.functionDeclarations")
            # the API reads either spelling; google-genai sends this field in snake_case
            keys = ("parametersJsonSchema", "parameters_json_schema", "parameters")
            schema = next((decl[k] for k in keys if k in decl), None)
            counter.offer(decl, str(decl.get("name", "")), schema)
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    max_tokens = config.get("maxOutputTokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise RequestError(
            "generation_config.max_output_tokens must be a positive integer.",
            "generationConfig.maxOutputTokens",
        )
    thinking = config.get("thinkingConfig")
    counter.tools = gemini_callable(body, counter.tools)
    return counter.counted(
        body,
        gemini_output(body),
        format="gemini",
        model=model,
        system=system,
        turns=tuple(turns),
        stream=stream,
        thinking=isinstance(thinking, dict) and bool(thinking.get("includeThoughts")),
        max_tokens=max_tokens,
    )


# --- OpenAI Responses ---------------------------------------------------------------------------


def _check_reasoning(item: dict[str, Any], where: str) -> None:
    item_id = str(item.get("id", ""))
    blob = item.get("encrypted_content")
    if not isinstance(blob, str):
        raise RequestError(
            f"Item with id '{item_id}' not found. Items are not persisted when `store` is set "
            "to false. Try again with `store` set to true, or remove this item from your input.",
            where,
        )
    if blob != encrypted_for(item_id):
        raise RequestError(
            f"The encrypted content for item {item_id} could not be verified.", where
        )


def _content(content: Any, counter: _Counter, where: str) -> str:
    """A message item's text: a string, or `input_text` / `output_text` parts (images counted)."""
    if isinstance(content, str) or content is None:
        return counter.add(content or "")
    texts: list[str] = []
    for _, part in _dicts(content, f"{where}.content", "[{}]"):
        if part.get("type") in ("input_text", "output_text", "text"):
            texts.append(counter.add(str(part.get("text", ""))))
        elif part.get("type") in ("input_image", "input_file"):
            counter.images += 1
        else:
            counter.add(_dumps(part))
    return "\n".join(texts)


def _add(turns: list[Turn], role: str, blocks: list[Block]) -> None:
    if turns and turns[-1].role == role:
        turns[-1] = Turn(turns[-1].role, turns[-1].blocks + tuple(blocks))
    else:
        turns.append(Turn("assistant" if role == "assistant" else "user", tuple(blocks)))


def parse_responses(body: Any) -> Conversation:
    body = _require_dict(body, "body")
    counter = _Counter()
    model = _model(body)
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    turns: list[Turn] = []
    system = counter.add(str(body.get("instructions") or ""))
    for where, item in _dicts(items, "input", "[{}]"):
        kind = item.get("type", "message")
        if kind == "reasoning":
            _check_reasoning(item, where)
            counter.add(str(item.get("encrypted_content", ""))[:64])
        elif kind == "function_call":
            name = counter.add(str(item.get("name", "")))
            args = counter.add(str(item.get("arguments", "")))
            _add(turns, "assistant", [ToolUse(str(item.get("call_id", "")), name, args)])
        elif kind == "function_call_output":
            output = item.get("output", "")
            text = counter.add(output if isinstance(output, str) else _dumps(output))
            result = ToolResult(str(item.get("call_id", "")), text, _looks_like_error(text))
            _add(turns, "user", [result])
        elif kind == "message":
            role = item.get("role")
            text = _content(item.get("content"), counter, where)
            if role in ("system", "developer"):
                system = "\n".join(x for x in (system, text) if x)
            elif role in ("user", "assistant"):
                _add(turns, str(role), [Text(text)] if text else [])
            else:
                raise RequestError(
                    f"Invalid value: '{role}'. Supported values are: 'user', "
                    "'assistant', 'system' and 'developer'.",
                    f"{where}.role",
                )
        else:
            counter.add(_dumps(item))
    for _, tool in _dicts(body.get("tools") or [], "tools", "[{}]"):
        if tool.get("type") == "function":
            counter.offer(tool, str(tool.get("name", "")), tool.get("parameters"))
        else:  # a built-in tool (web search, ...): prompt, not a function to call
            counter.add(_dumps(tool))
    include = body.get("include") or []
    return counter.counted(
        body,
        responses_output(body),
        format="responses",
        model=model,
        system=system,
        turns=tuple(turns),
        thinking=isinstance(include, list) and ENCRYPTED in include,
        max_tokens=_max_tokens(body, "max_output_tokens"),
    )
