"""The request parsers of the four wire formats (Anthropic Messages, OpenAI Chat, Gemini, OpenAI
Responses): each reads a request body into one `Conversation`, counting its prompt as it goes,
and says what is wrong with a body in the format's own words (`RequestError`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ._codec import Route
from ._conversation import (
    ENCRYPTED,
    SIGNATURE_STANDIN,
    Block,
    Conversation,
    Format,
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
    Output,
    anthropic_output,
    gemini_callable,
    gemini_output,
    openai_output,
    responses_output,
)

_ERROR_PREFIXES = ("error", "exception", "traceback", "tool error", "failed", "invalid")


@dataclass(frozen=True)
class _Parts:
    """How a format's content field reads when it is a list of typed parts: the `texts` kinds
    are its text (joined by newlines), the `images` kinds count as images, any other part counts
    as its JSON when `others` (the format's token count includes it); `index` spells a part's
    place in the format's errors."""

    texts: tuple[str, ...]
    images: tuple[str, ...]
    others: bool
    index: str = ".{}"


_ANTHROPIC_PARTS = _Parts(("text",), ("image", "document"), others=False)
_OPENAI_PARTS = _Parts(("text",), ("image_url", "input_image", "image"), others=True)
_RESPONSES_PARTS = _Parts(
    ("input_text", "output_text", "text"), ("input_image", "input_file"), others=True, index="[{}]"
)


class Reading:
    """A request body being read into a `Conversation`: the system prompt and the history so
    far, the tools it offers, and what it has counted of the prompt (its characters and its
    images)."""

    def __init__(self, body: Any, route: Route) -> None:
        self.body = _require_dict(body, "body")
        self.route = route  # its format (and Gemini's model and streaming, named in the path)
        self.model = route.model or _model(self.body)  # checked first, as the APIs do
        self.turns: list[Turn] = []
        self.system: list[str] = []  # the system prompt's parts, joined by newlines
        self.tools: dict[str, dict[str, Any]] = {}  # the tools to call: name -> JSON Schema
        self.chars = 0
        self.images = 0

    def add(self, text: str) -> str:
        self.chars += len(text)
        return text

    def offer(self, tool: dict[str, Any], name: str, schema: Any) -> None:
        """Keep a tool the request offers, by `name`, with its `schema` ({} unless it is one);
        its declaration's JSON is prompt."""
        self.tools[name] = schema if isinstance(schema, dict) else {}
        self.add(_dumps(tool))

    def call(self, call_id: Any, name: Any, arguments: str) -> ToolUse:
        """A tool call of the history; its name and arguments are prompt."""
        return ToolUse(str(call_id), self.add(str(name)), self.add(arguments))

    def text(self, content: Any, param: str, parts: _Parts) -> str:
        """The text of a content field that is None, a string, or a list of typed `parts`."""
        if content is None or isinstance(content, str):
            return self.add(content or "")
        texts: list[str] = []
        for _, part in _dicts(content, param, parts.index):
            kind = part.get("type")
            if kind in parts.texts:
                texts.append(self.add(str(part.get("text", ""))))
            elif kind in parts.images:
                self.images += 1
            elif parts.others:
                self.add(_dumps(part))
        return "\n".join(texts)

    def turn(self, role: str, blocks: Iterable[Block], *, joins: bool = False) -> None:
        """Add a turn to the history; with `joins`, add its blocks to the last turn instead
        when that one has the same role."""
        last = self.turns[-1] if self.turns else None
        if joins and last is not None and last.role == role:
            self.turns[-1] = Turn(last.role, last.blocks + tuple(blocks))
        else:
            self.turns.append(Turn("assistant" if role == "assistant" else "user", tuple(blocks)))

    def conversation(
        self, output: Callable[[dict[str, Any]], Output], **fields: Any
    ) -> Conversation:
        """The `Conversation` of `fields` in its route's format, with its system prompt, its
        history, its tools, its prompt's estimated size and the structured answer the body asks
        for (`output` reads the schema and the forced tool; the schema is prompt tokens, as
        providers bill it); its model (the path's, else the body's), and a stream as the body's
        `stream` says, with its usage, unless `fields` say otherwise."""
        schema, forced = output(self.body)
        if schema is not None:
            self.add(_dumps(schema))
        stream = bool(self.body.get("stream", False))
        asked = {"model": self.model, "stream": stream, "include_usage": True, **fields}
        return Conversation(
            **asked,
            format=self.route.format,
            system="\n".join(part for part in self.system if part),
            turns=tuple(self.turns),
            tools=self.tools,
            prompt_tokens=max(1, estimate_tokens(self.chars, self.images)),
            output_schema=schema,
            forced_tool=forced,
        )


def _require_dict(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(f"{param}: Input should be a valid dictionary", param)
    return value


def _dicts(value: Any, param: str, index: str = ".{}") -> Iterator[tuple[str, dict[str, Any]]]:
    """The items of the list `value` (the request's `param`), each a dictionary, with its place
    (`param` and its `index`, spelt as the format's errors spell it)."""
    if not isinstance(value, list):
        raise RequestError(f"{param}: Input should be a valid list", param)
    for i, raw in enumerate(value):
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


# --- Anthropic Messages -------------------------------------------------------------------------


def _anthropic_blocks(content: Any, read: Reading, param: str) -> list[Block]:
    if isinstance(content, str):
        return [Text(read.add(content))]
    blocks: list[Block] = []
    for where, block in _dicts(content, f"{param}.content"):
        kind = block.get("type")
        if kind == "text":
            blocks.append(Text(read.add(str(block.get("text", "")))))
        elif kind in ("thinking", "redacted_thinking"):
            read.add(str(block.get("thinking", block.get("data", ""))))
        elif kind in ("tool_use", "server_tool_use"):
            arguments = _dumps(block.get("input", {}))
            blocks.append(read.call(block.get("id", ""), block.get("name", ""), arguments))
        elif kind == "tool_result":
            text = read.text(block.get("content"), f"{where}.content", _ANTHROPIC_PARTS)
            is_error = bool(block.get("is_error", False))
            blocks.append(ToolResult(str(block.get("tool_use_id", "")), text, is_error))
        elif kind in ("image", "document"):
            read.images += 1
        elif kind is None:
            raise RequestError(f"{where}.type: Field required", f"{where}.type")
        else:
            read.add(_dumps(block))
    return blocks


def _anthropic(read: Reading) -> Conversation:
    body = read.body
    max_tokens = _max_tokens(body, "max_tokens")
    if max_tokens is None:
        raise RequestError("max_tokens: Field required", "max_tokens")
    read.system.append(read.text(body.get("system") or "", "system", _ANTHROPIC_PARTS))
    for where, message in _dicts(body.get("messages"), "messages"):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise RequestError(
                f"{where}.role: Input should be 'user' or 'assistant'", f"{where}.role"
            )
        read.turn(role, _anthropic_blocks(message.get("content", ""), read, where))
    for where, tool in _dicts(body.get("tools") or [], "tools"):
        name = tool.get("name")
        if not isinstance(name, str):
            raise RequestError(f"{where}.name: Field required", f"{where}.name")
        read.offer(tool, name, tool.get("input_schema"))
    thinking = body.get("thinking")
    wants_thinking = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    return read.conversation(
        anthropic_output,
        thinking=wants_thinking,
        max_tokens=max_tokens,
    )


# --- OpenAI Chat Completions --------------------------------------------------------------------


def _openai(read: Reading) -> Conversation:
    body = read.body
    max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
    for where, message in _dicts(body.get("messages"), "messages", ".[{}]"):
        role = message.get("role")
        text = read.text(message.get("content"), where, _OPENAI_PARTS)
        if role in ("system", "developer"):
            read.system.append(text)
        elif role == "user":
            read.turn("user", [Text(text)])
        elif role == "assistant":
            blocks: list[Block] = [Text(text)] if text else []
            for place, call in _dicts(message.get("tool_calls") or [], where, ".tool_calls.[{}]"):
                function = _require_dict(call.get("function", {}), place)
                arguments = str(function.get("arguments", ""))
                blocks.append(read.call(call.get("id", ""), function.get("name", ""), arguments))
            read.turn("assistant", blocks)
        elif role == "tool":  # the results of one turn's calls are one user turn
            result = ToolResult(str(message.get("tool_call_id", "")), text, _looks_like_error(text))
            last = read.turns[-1] if read.turns else None
            read.turn("user", [result], joins=last is not None and bool(last.tool_results))
        else:
            raise RequestError(f"Invalid value for '{where}.role': '{role}'.", f"{where}.role")
    for i, (where, tool) in enumerate(_dicts(body.get("tools") or [], "tools", ".[{}]")):
        function = _require_dict(tool.get("function"), f"{where}.function")
        tool_name = function.get("name")
        if not isinstance(tool_name, str):
            raise RequestError(f"Missing required parameter: 'tools[{i}].function.name'.", "tools")
        read.offer(tool, tool_name, function.get("parameters"))
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return read.conversation(
        openai_output,
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


def _gemini_blocks(content: Any, read: Reading, where: str, role: str) -> list[Block]:
    blocks: list[Block] = []
    signed = False
    for place, part in _dicts(content.get("parts", []), f"{where}.parts", "[{}]"):
        call = part.get("functionCall")
        response = part.get("functionResponse")
        if isinstance(call, dict):
            if role == "model" and not signed:
                _check_signature(part, call, place)
                signed = True
            name = call.get("name", "")
            blocks.append(read.call(call.get("id") or name, name, _dumps(call.get("args") or {})))
        elif isinstance(response, dict):
            body = response.get("response")
            body = body if isinstance(body, dict) else {}
            is_error = "error" in body and "output" not in body
            value = body.get("error") if is_error else body.get("output", body.get("result", body))
            text = value if isinstance(value, str) else _dumps(value)
            call_id = str(response.get("id") or response.get("name") or "")
            blocks.append(ToolResult(call_id, read.add(text), is_error))
        elif isinstance(part.get("text"), str):
            if part.get("thought") is not True:
                blocks.append(Text(read.add(part["text"])))
        elif "inlineData" in part or "fileData" in part:
            read.images += 1
    return blocks


def _gemini(read: Reading) -> Conversation:
    """A `generateContent` request (the model comes from the path) as a neutral conversation."""
    body = read.body
    for where, content in _dicts(body.get("contents"), "contents", "[{}]"):
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise RequestError(
                f"Please use a valid role: user, model (got {role!r}).", f"{where}.role"
            )
        blocks = _gemini_blocks(content, read, where, role)
        read.turn("assistant" if role == "model" else "user", blocks)
    instruction = body.get("systemInstruction")
    if isinstance(instruction, dict):
        texts = [p.get("text", "") for p in instruction.get("parts", []) if isinstance(p, dict)]
        read.system.append(read.add("\n".join(str(t) for t in texts)))
    for _, group in _dicts(body.get("tools") or [], "tools", ""):
        for _, decl in _dicts(
            group.get("functionDeclarations") or [], "tools.functionDeclarations", ""
        ):
            # the API reads either spelling; google-genai sends this field in snake_case
            keys = ("parametersJsonSchema", "parameters_json_schema", "parameters")
            schema = next((decl[k] for k in keys if k in decl), None)
            read.offer(decl, str(decl.get("name", "")), schema)
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    max_tokens = _max_tokens(config, "maxOutputTokens")
    thinking = config.get("thinkingConfig")
    read.tools = gemini_callable(body, read.tools)
    return read.conversation(
        gemini_output,
        stream=bool(read.route.stream),
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


def _responses(read: Reading) -> Conversation:
    body = read.body
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    read.system.append(read.add(str(body.get("instructions") or "")))
    for where, item in _dicts(items, "input", "[{}]"):
        kind = item.get("type", "message")
        if kind == "reasoning":
            _check_reasoning(item, where)
            read.add(str(item.get("encrypted_content", ""))[:64])
        elif kind == "function_call":
            call = read.call(
                item.get("call_id", ""), item.get("name", ""), str(item.get("arguments", ""))
            )
            read.turn("assistant", [call], joins=True)
        elif kind == "function_call_output":
            output = item.get("output", "")
            text = read.add(output if isinstance(output, str) else _dumps(output))
            result = ToolResult(str(item.get("call_id", "")), text, _looks_like_error(text))
            read.turn("user", [result], joins=True)
        elif kind == "message":
            role = item.get("role")
            text = read.text(item.get("content"), f"{where}.content", _RESPONSES_PARTS)
            if role in ("system", "developer"):
                read.system.append(text)
            elif role in ("user", "assistant"):
                read.turn(str(role), [Text(text)] if text else [], joins=True)
            else:
                raise RequestError(
                    f"Invalid value: '{role}'. Supported values are: 'user', "
                    "'assistant', 'system' and 'developer'.",
                    f"{where}.role",
                )
        else:
            read.add(_dumps(item))
    for _, tool in _dicts(body.get("tools") or [], "tools", "[{}]"):
        if tool.get("type") == "function":
            read.offer(tool, str(tool.get("name", "")), tool.get("parameters"))
        else:  # a built-in tool (web search, ...): prompt, not a function to call
            read.add(_dumps(tool))
    include = body.get("include") or []
    return read.conversation(
        responses_output,
        thinking=isinstance(include, list) and ENCRYPTED in include,
        max_tokens=_max_tokens(body, "max_output_tokens"),
    )


PARSERS: dict[Format, Callable[[Reading], Conversation]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "gemini": _gemini,
    "responses": _responses,
}
"""Each wire format's request parser: a body being read (and its route: Gemini names the model
and the streaming in the path) as a `Conversation`, or the `RequestError` the format answers."""
