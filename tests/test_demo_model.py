"""The offline demo model: tool use, recovery, misbehaviour on demand, determinism, usage."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mock_support import sse_events

from nbagent.demo import demo_reply
from nbagent.demo._arithmetic import evaluate, find_expression
from nbagent.mock import MockServer, parse_request, serve
from nbagent.mock._conversation import RequestError

SCHEMAS: dict[str, dict[str, Any]] = {
    "calculator": {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
    "read_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    "list_dir": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}
FORMATS = ["anthropic", "openai"]
ToolFn = Callable[[str, str], tuple[str, bool]]  # (name, raw arguments) -> (content, is_error)


class Turn:
    """One decoded assistant reply, format-independent."""

    def __init__(self) -> None:
        self.text = ""
        self.calls: list[tuple[str, str, str]] = []  # (id, name, raw arguments)
        self.stop = ""
        self.input_tokens = 0
        self.output_tokens = 0


def decode_anthropic(raw: bytes) -> Turn:
    turn = Turn()
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in sse_events(raw):
        payload = json.loads(data)
        if name == "message_start":
            turn.input_tokens = payload["message"]["usage"]["input_tokens"]
        elif name == "content_block_start":
            blocks[payload["index"]] = dict(payload["content_block"], raw="")
        elif name == "content_block_delta":
            delta = payload["delta"]
            if delta["type"] == "text_delta":
                turn.text += delta["text"]
            elif delta["type"] == "input_json_delta":
                blocks[payload["index"]]["raw"] += delta["partial_json"]
        elif name == "content_block_stop":
            block = blocks[payload["index"]]
            if block["type"] == "tool_use":
                turn.calls.append((block["id"], block["name"], block["raw"]))
        elif name == "message_delta":
            turn.stop = payload["delta"]["stop_reason"]
            turn.output_tokens = payload["usage"]["output_tokens"]
    return turn


def decode_openai(raw: bytes) -> Turn:
    turn = Turn()
    calls: dict[int, list[str]] = {}
    for _, data in sse_events(raw):
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        if chunk.get("usage"):
            turn.input_tokens = chunk["usage"]["prompt_tokens"]
            turn.output_tokens = chunk["usage"]["completion_tokens"]
        for choice in chunk["choices"]:
            turn.text += choice["delta"].get("content") or ""
            for call in choice["delta"].get("tool_calls") or []:
                slot = calls.setdefault(call["index"], ["", "", ""])
                slot[0] = call.get("id") or slot[0]
                slot[1] += call.get("function", {}).get("name") or ""
                slot[2] += call.get("function", {}).get("arguments") or ""
            turn.stop = choice["finish_reason"] or turn.stop
    turn.calls = [(a, b, c) for a, b, c in calls.values()]
    return turn


class Chat:
    """A minimal agent loop over HTTP in one wire format."""

    def __init__(self, client: httpx.Client, fmt: str, tools: list[str], **extra: Any) -> None:
        self.client, self.fmt, self.extra = client, fmt, extra
        self.messages: list[dict[str, Any]] = []
        if fmt == "anthropic":
            self.tools = [{"name": n, "description": n, "input_schema": SCHEMAS[n]} for n in tools]
        else:
            self.tools = [
                {
                    "type": "function",
                    "function": {"name": n, "description": n, "parameters": SCHEMAS[n]},
                }
                for n in tools
            ]

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": "demo", "messages": self.messages, "stream": True}
        if self.tools:
            body["tools"] = self.tools
        if self.fmt == "anthropic":
            body["max_tokens"] = 1024
        else:
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra)
        return body

    def send(self) -> Turn:
        path = "/v1/messages" if self.fmt == "anthropic" else "/v1/chat/completions"
        r = self.client.post(path, json=self.body())
        assert r.status_code == 200, r.text
        turn = decode_anthropic(r.content) if self.fmt == "anthropic" else decode_openai(r.content)
        if self.fmt == "anthropic":
            content: list[dict[str, Any]] = (
                [{"type": "text", "text": turn.text}] if turn.text else []
            )
            for call_id, name, raw in turn.calls:
                try:
                    arguments = json.loads(raw)
                except ValueError:
                    arguments = {}
                content.append(
                    {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
                )
            self.messages.append({"role": "assistant", "content": content})
        else:
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if turn.calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in turn.calls
                ]
            self.messages.append(message)
        return turn

    def results(self, turn: Turn, tool: ToolFn) -> None:
        outputs = [(call_id, *tool(name, raw)) for call_id, name, raw in turn.calls]
        if self.fmt == "anthropic":
            blocks = [
                {"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e}
                for i, c, e in outputs
            ]
            self.messages.append({"role": "user", "content": blocks})
        else:
            for call_id, content, is_error in outputs:
                text = f"Error: {content}" if is_error else content
                self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def run(self, prompt: str, tool: ToolFn, limit: int = 6) -> list[Turn]:
        self.messages.append({"role": "user", "content": prompt})
        turns: list[Turn] = []
        for _ in range(limit):
            turn = self.send()
            turns.append(turn)
            if not turn.calls:
                return turns
            self.results(turn, tool)
        raise AssertionError("the demo model kept calling tools")


def honest_tools(name: str, raw: str) -> tuple[str, bool]:
    """Tool handlers that validate arguments like the agent's dispatcher would."""
    if name not in SCHEMAS:
        return f"unknown tool {name!r}", True
    try:
        args = json.loads(raw)
    except ValueError:
        return "arguments are not valid JSON", True
    if set(args) != {next(iter(SCHEMAS[name]["required"]))} or not isinstance(
        next(iter(args.values())), str
    ):
        return "arguments do not match the schema", True
    if name == "calculator":
        return str(evaluate(args["expression"])), False
    if name == "read_file":
        return "alpha beta\ngamma\n\ndelta epsilon zeta\n", False
    return "a.csv\nb.csv\nnotes.txt", False


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with serve() as s:
        yield s


@pytest.fixture
def client(server: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


# --- tool use -----------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_calculator_round_trip(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, ["calculator"]).run("What is 17 * 23 + 4?", honest_tools)
    assert len(turns) == 2
    first, final = turns
    assert first.stop in ("tool_use", "tool_calls")
    assert [(n, json.loads(a)) for _, n, a in first.calls] == [
        ("calculator", {"expression": "17 * 23 + 4"})
    ]
    assert final.text == "17 * 23 + 4 = 395."
    assert final.stop in ("end_turn", "stop")


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_calculator_error_is_acknowledged(client: httpx.Client, fmt: str) -> None:
    def broken(name: str, raw: str) -> tuple[str, bool]:
        return "ZeroDivisionError: calculator is broken", True

    turns = Chat(client, fmt, ["calculator"]).run("What is 12 / 4?", broken)
    assert len(turns) == 2 and not turns[-1].calls
    assert "error" in turns[-1].text and "12 / 4 = 3" in turns[-1].text


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_read_file_is_summarised(client: httpx.Client, fmt: str) -> None:
    chat = Chat(client, fmt, ["read_file", "list_dir", "calculator"])
    turns = chat.run("Please read the file notes.txt and tell me what it says.", honest_tools)
    assert [(n, json.loads(a)) for _, n, a in turns[0].calls] == [
        ("read_file", {"path": "notes.txt"})
    ]
    assert "notes.txt has 4 lines and 6 words" in turns[-1].text
    assert "“alpha beta”" in turns[-1].text


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_list_dir_is_summarised(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, ["read_file", "list_dir"]).run(
        "What files are in data/?", honest_tools
    )
    assert [(n, json.loads(a)) for _, n, a in turns[0].calls] == [("list_dir", {"path": "data/"})]
    assert turns[-1].text == "data/ contains 3 entries: a.csv, b.csv, notes.txt."


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_plain_prompt_streams_many_deltas(client: httpx.Client, fmt: str) -> None:
    chat = Chat(client, fmt, ["calculator"])
    chat.messages.append({"role": "user", "content": "Why is the sky blue?"})
    path = "/v1/messages" if fmt == "anthropic" else "/v1/chat/completions"
    raw = client.post(path, json=chat.body()).content
    deltas = sum(1 for _, d in sse_events(raw) if '"text_delta"' in d or '"content":" ' in d)
    turn = decode_anthropic(raw) if fmt == "anthropic" else decode_openai(raw)
    assert deltas >= 20 and turn.text.count(". ") >= 3 and "Why is the sky blue" in turn.text
    assert not turn.calls


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_arithmetic_without_calculator_is_answered_directly(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, []).run("What is (2 + 3) * 4?", honest_tools)
    assert len(turns) == 1 and turns[0].text.startswith("(2 + 3) * 4 = 20.")


# --- misbehaviour on demand and recovery --------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_unknown_tool_then_recovery(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, ["calculator"]).run(
        "[demo:unknown_tool] What is 2 + 2?", honest_tools
    )
    assert [n for _, n, _ in turns[0].calls] == ["delete_everything"]
    assert [n for _, n, _ in turns[1].calls] == ["calculator"]
    assert turns[1].text.startswith("Sorry, that call failed")
    assert turns[2].text == "2 + 2 = 4."


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_bad_json_then_recovery(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, ["calculator"]).run("[demo:bad_json] What is 9 - 2?", honest_tools)
    [(_, name, raw)] = turns[0].calls
    assert name == "calculator"
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    assert turns[-1].text == "9 - 2 = 7." and len(turns) == 3


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_bad_args_break_the_schema(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, ["calculator"]).run("[demo:bad_args] What is 5 * 5?", honest_tools)
    args = json.loads(turns[0].calls[0][2])
    assert not isinstance(args["expression"], str) and "unexpected_argument" in args
    assert turns[-1].text == "5 * 5 = 25."


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_misbehaviour_without_a_right_tool_ends_in_text(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, ["calculator"]).run(
        "[demo:unknown_tool] Tell me a story.", honest_tools
    )
    assert len(turns) == 2 and "delete_everything tool reported an error" in turns[-1].text


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_at_most_two_tool_rounds(client: httpx.Client, fmt: str) -> None:
    def always_fails(name: str, raw: str) -> tuple[str, bool]:
        return "tool exploded", True

    turns = Chat(client, fmt, ["calculator"]).run("[demo:bad_args] What is 1 + 1?", always_fails)
    assert [bool(t.calls) for t in turns] == [True, True, False]
    assert "error" in turns[-1].text


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_max_tokens_marker(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, ["calculator"]).run("[demo:max_tokens] hello", honest_tools)
    assert turns[0].text == "" and not turns[0].calls
    assert turns[0].stop == ("max_tokens" if fmt == "anthropic" else "length")


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_long_marker(client: httpx.Client, fmt: str) -> None:
    turns = Chat(client, fmt, []).run("[demo:long] Describe the loop.", honest_tools)
    assert len(turns[0].text.split()) > 1500


# --- determinism and usage ----------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_same_conversation_same_reply(client: httpx.Client, fmt: str) -> None:
    def once(prompt: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
        turns = Chat(client, fmt, ["calculator"]).run(prompt, honest_tools)
        return [(t.text, t.calls) for t in turns]

    assert once("What is 3 * 3?") == once("What is 3 * 3?")
    assert once("Tell me about owls.") == once("Tell me about owls.")
    assert once("Tell me about owls.") != once("Tell me about cats.")


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", FORMATS)
def test_usage_is_consistent(client: httpx.Client, fmt: str) -> None:
    prompt = "Explain recursion with an example, please."
    [turn] = Chat(client, fmt, []).run(prompt, honest_tools)
    assert turn.input_tokens == -(-len(prompt) // 4)
    assert turn.output_tokens == -(-len(turn.text) // 4)


def test_prompt_tokens_count_tools_system_and_images() -> None:
    body = {
        "model": "demo",
        "max_tokens": 10,
        "system": "x" * 40,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "y" * 40},
                    {"type": "image", "source": {"type": "base64", "data": "..."}},
                ],
            }
        ],
    }
    assert parse_request("anthropic", body).prompt_tokens == 20 + 1000
    tool: dict[str, Any] = {"name": "t", "input_schema": {}}
    body["tools"] = [tool]
    tool_chars = len(json.dumps(tool, separators=(",", ":")))
    assert parse_request("anthropic", body).prompt_tokens == -(-(80 + tool_chars) // 4) + 1000


def test_openai_tool_error_heuristic_and_system_prompt() -> None:
    body = {
        "model": "demo",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "What is 8 / 0?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "calculator", "arguments": '{"expression": "8 / 0"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "Error: division by zero"},
        ],
        "tools": [{"type": "function", "function": {"name": "calculator", "parameters": {}}}],
    }
    conversation = parse_request("openai", body)
    assert conversation.system == "Be terse."
    assert conversation.turns[-1].tool_results[0].is_error
    reply = demo_reply(conversation)
    assert not reply.tool_calls and "calculator tool reported an error" in reply.text


def test_summary_request_lists_earlier_prompts() -> None:
    body = {
        "model": "demo",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "Paris."},
            {"role": "user", "content": "Summarize the conversation so far."},
        ],
    }
    text = demo_reply(parse_request("anthropic", body)).text
    assert text.startswith("Summary of the conversation so far") and "capital of France" in text


def test_arithmetic_helpers() -> None:
    assert find_expression("What is 17 * 23 + 4?") == "17 * 23 + 4"
    assert find_expression("Compute (1 + 2) * 3, thanks") == "(1 + 2) * 3"
    assert find_expression("read logs/app.txt") is None
    assert find_expression("I have 3 cats") is None
    assert evaluate("17 * 23 + 4") == "395"
    assert evaluate("7 / 2") == "3.5"
    assert evaluate("2 ^ 10") == "1024"
    assert evaluate("1 / 0") is None
    assert evaluate("__import__('os')") is None
    assert evaluate("9 ** 9999") is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]), "content": JSON},
    optional={"tool_calls": JSON, "tool_call_id": JSON},
)
BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking", "other"])},
    optional={"text": JSON, "input": JSON, "content": JSON, "id": JSON, "name": JSON},
)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, database=None)
@given(
    fmt=st.sampled_from(["anthropic", "openai"]),
    messages=st.lists(
        MESSAGE | st.fixed_dictionaries({"role": st.just("user"), "content": st.lists(BLOCK)}),
        max_size=5,
    ),
    tools=st.none() | JSON,
)
def test_any_request_is_answered_or_rejected_cleanly(
    fmt: str, messages: list[Any], tools: Any
) -> None:
    body = {"model": "demo", "max_tokens": 50, "messages": messages, "tools": tools}
    try:
        conversation = parse_request(fmt, body)  # type: ignore[arg-type]
    except RequestError:
        return
    reply = demo_reply(conversation)
    assert reply.text or reply.tool_calls or reply.stop_reason == "max_tokens" or not messages
