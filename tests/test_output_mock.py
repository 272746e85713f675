"""Structured answers over real sockets: every wire format and mode against the mock server, the
answer faults (`invalid_json`, `schema_mismatch`, `refusal`, `truncated`), the demo model's
markers, and the reask's prompt measured on the request bodies the mock received."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from mock_support import serve_process
from pydantic import BaseModel, Field
from test_e2e_faults import FAST, provider
from test_e2e_faults import run as run_agent

from nbagent import Agent, OutputInvalid, OutputTruncated
from nbagent import errors as E
from nbagent.mock import MockReply, MockServer, MockToolCall, answer_fault, parse_fault
from nbagent.mock._conversation import Conversation

pytestmark = pytest.mark.e2e


class Review(BaseModel):
    """A product review, read."""

    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)
    summary: str = Field(max_length=60)
    keywords: list[str] = Field(min_length=1, max_length=3)


PROMPT = "I love this kettle: it boils fast and looks great."


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with MockServer() as s:
        yield s


def agent(fmt: str, server: MockServer, **kw: Any) -> Agent:
    kw.setdefault("output", Review)
    return Agent(provider(fmt, server), retry=FAST, limiter=False, **kw)


def last_bodies(server: MockServer, n: int) -> list[dict[str, Any]]:
    return [r.body for r in server.requests[-n:]]


WHERE = {
    ("anthropic", "native"): lambda b: b["output_config"]["format"]["schema"],
    ("openai", "native"): lambda b: b["response_format"]["json_schema"]["schema"],
    ("responses", "native"): lambda b: b["text"]["format"]["schema"],
    ("gemini", "native"): lambda b: b["generationConfig"]["responseJsonSchema"],
    ("anthropic", "tool"): lambda b: b["tool_choice"]["name"],
    ("openai", "tool"): lambda b: b["tool_choice"]["function"]["name"],
    ("responses", "tool"): lambda b: b["tool_choice"]["name"],
    ("gemini", "tool"): lambda b: b["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"],
}


@pytest.mark.parametrize("mode", ["native", "tool", "prompted"])
@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "gemini", "azure"])
def test_every_format_and_mode_gets_a_valid_answer(server: MockServer, fmt: str, mode: str) -> None:
    result = run_agent(agent(fmt, server, output_mode=mode), PROMPT)
    review = result.output
    assert isinstance(review, Review)
    assert review.sentiment == "positive" and review.stars >= 4  # the demo reads the words
    body = server.requests[-1].body
    where = WHERE.get(("openai" if fmt == "azure" else fmt, mode))
    if where is not None:
        assert where(body)  # the answer's shape went where the format documents it
    else:
        assert "JSON Schema" in json.dumps(body)  # prompted: in the system prompt


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "gemini"])
def test_a_mismatched_answer_is_reasked_and_recovered_over_the_wire(
    server: MockServer, fmt: str
) -> None:
    server.set_faults(["schema_mismatch"])
    a = agent(fmt, server, output_mode="native")
    result = run_agent(a, PROMPT)
    assert result.reasks == 1 and isinstance(result.output, Review)
    actions = a.attempts["action"].tolist()
    assert actions == ["reask", "none"]


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "gemini"])
@pytest.mark.parametrize(
    ("kind", "error"), [("refusal", E.ContentFiltered), ("truncated", OutputTruncated)]
)
def test_refusal_and_truncation_make_exactly_one_request(
    server: MockServer, fmt: str, kind: str, error: type[Exception]
) -> None:
    server.set_faults([kind])
    before = len(server.requests)
    with pytest.raises(error):
        run_agent(agent(fmt, server, output_mode="native"), PROMPT)
    assert len(server.requests) == before + 1


def test_invalid_json_in_tool_mode_is_reasked_with_a_tool_result(server: MockServer) -> None:
    server.set_faults(["invalid_json"])
    a = agent("openai", server, output_mode="tool")
    result = run_agent(a, PROMPT)
    assert result.reasks == 1
    reask = last_bodies(server, 1)[0]["messages"]
    assert reask[-1]["role"] == "tool" and "not valid JSON" in reask[-1]["content"]


def test_the_nth_reasks_prompt_is_the_first_reasks_plus_one_answer_at_most(
    server: MockServer,
) -> None:
    server.set_faults(["schema_mismatch"] * 4)
    a = agent("anthropic", server, output_mode="native", output_retries=4)
    result = run_agent(a, PROMPT)
    assert result.reasks == 4
    bodies = last_bodies(server, 5)
    sizes = [len(json.dumps(b["messages"])) for b in bodies]
    answer = max(
        len(json.dumps(m)) for b in bodies for m in b["messages"] if m["role"] == "assistant"
    )
    first_reask = sizes[1]
    for later in sizes[2:]:
        assert later <= first_reask + answer
    # every reask carries the prompt, one failed answer and its errors: never a pile of them
    for body in bodies[1:]:
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


def test_past_output_retries_over_the_wire_fails_with_the_errors(server: MockServer) -> None:
    server.set_faults(["schema_mismatch"] * 3)
    a = agent("gemini", server, output_mode="native", output_retries=2)
    with pytest.raises(OutputInvalid) as caught:
        run_agent(a, PROMPT)
    assert {e.path for e in caught.value.errors} >= {"sentiment", "stars"}
    assert a.history == [] and a.attempts["action"].tolist() == ["reask", "reask", "fail"]


@pytest.mark.parametrize(
    ("marker", "outcome"),
    [
        ("[demo:schema_mismatch]", "reasked"),
        ("[demo:invalid_json]", "reasked"),
        ("[demo:refusal]", E.ContentFiltered),
        ("[demo:truncated]", OutputTruncated),
    ],
)
def test_the_demo_models_markers_misbehave_once(marker: str, outcome: Any) -> None:
    a = Agent("demo", output=Review)
    if outcome == "reasked":
        result = a.run_sync(f"{PROMPT} {marker}", show=False)
        assert result.reasks == 1 and result.output.sentiment == "positive"
    else:
        with pytest.raises(outcome):
            a.run_sync(f"{PROMPT} {marker}", show=False)


def test_the_demo_answers_the_same_prompt_the_same_way() -> None:
    first = Agent("demo", output=Review).run_sync("Slow, broken, a refund please.", show=False)
    again = Agent("demo", output=Review).run_sync("Slow, broken, a refund please.", show=False)
    assert first.output == again.output and first.output.sentiment == "negative"


# -- the faults themselves, without a server ---------------------------------------------------


@pytest.mark.parametrize("kind", ["invalid_json", "schema_mismatch", "refusal", "truncated"])
def test_the_answer_faults_parse_and_print_back(kind: str) -> None:
    fault = parse_fault(kind)
    assert fault.kind == kind and str(fault) == kind and fault.status is None
    assert str(parse_fault(f"{kind}:should_retry=false")) == f"{kind}:should_retry=false"


def conv(**kw: Any) -> Conversation:
    return Conversation(format="openai", model="m", system="", turns=(), **kw)


def test_an_answer_fault_changes_the_text_or_the_forced_tools_arguments() -> None:
    text = MockReply(text_deltas=('{"a": 1}',), input_tokens=5, output_tokens=3)
    broken = answer_fault("invalid_json", text, conv())
    with pytest.raises(ValueError):
        json.loads(broken.text)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    off = answer_fault("schema_mismatch", text, conv(output_schema=schema))
    assert json.loads(off.text) == {"a": "not a number", "unexpected_field": True}
    call = MockReply(tool_calls=(MockToolCall("c", "final_answer", '{"a": 1}'),))
    tools = {"final_answer": schema}
    cut = answer_fault(
        "truncated", call, conv(forced_tool="final_answer", tools=tools, max_tokens=9)
    )
    assert cut.stop_reason == "max_tokens" and cut.output_tokens == 9
    assert cut.tool_calls[0].arguments == '{"a"'  # half of it: not JSON
    refused = answer_fault("refusal", text, conv())
    assert refused.stop_reason == "refusal" and refused.refusal and not refused.text


def test_nbagent_serve_takes_the_answer_faults() -> None:
    with serve_process("--faults", "refusal,schema_mismatch") as url:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        body = {
            "model": "demo",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
            "output_config": {"format": {"type": "json_schema", "schema": schema}},
        }
        request = urllib.request.Request(
            f"{url}/v1/messages",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        answers = []
        for _ in range(2):
            with urllib.request.urlopen(request, timeout=10) as response:
                answers.append(json.loads(response.read()))
        refused, off = answers
        assert refused["stop_reason"] == "refusal"
        assert json.loads(off["content"][0]["text"]) == {
            "n": "not a number",
            "unexpected_field": True,
        }
