"""llama-cpp-python's server (`python -m llama_cpp.server`), where it parts from the API it speaks.

Its cut stream: captured from the real server, a stream its `interrupt_requests` stops for a
second request is content chunks, `data: [DONE]` and a clean end, with no finish_reason and no
usage, while its complete streams carry a finish_reason (and never a usage chunk). Its
structured outputs: its pydantic model takes `response_format` of type `text` or
`json_object` (with a `schema`), and refuses `json_schema` with HTTP 500 and FastAPI's
validation error (the body assembled from its source, with FastAPI's own text). The mock's
`emulate="llama-cpp-python"` behaves so, and these tests hold nbagent to both.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from provider_support import SENTINEL_KEY, fixture_text, read_whole, respond, run
from pydantic import BaseModel

from nbagent import Agent, RetryPolicy
from nbagent.analysis import summary
from nbagent.errors import (
    Action,
    BadRequest,
    ConfigError,
    SchemaRejected,
    StreamInterrupted,
    classify,
)
from nbagent.events import Event, TextDelta
from nbagent.mock import MockServer
from nbagent.mock._cli import build_parser
from nbagent.providers import Completed, OpenAIProvider, resolve_model
from nbagent.providers._http_errors import error_from_response

STREAMS = "llama-cpp-python__streams-complete-and-interrupted.json"
REFUSED = "assembled__llama-cpp-python-response-format-refused.json"
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05, seed=1)


def captured(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(fixture_text(name))
    return doc


def chat(**kw: Any) -> Any:
    def factory(client: httpx.AsyncClient) -> OpenAIProvider:
        return OpenAIProvider(
            "tiny", api_key=SENTINEL_KEY, base_url="http://127.0.0.1:8000/v1", client=client, **kw
        )

    return factory


def served(case: str) -> Any:
    """The handler answering with a captured case: its status, headers and body."""
    c = captured(STREAMS)[case]
    headers = {k: v for k, v in c["headers"].items() if k != "transfer-encoding"}
    return respond(c["body"], status=c["status"], headers=headers)


def text_of(case: str) -> str:
    chunks = [line[6:] for line in captured(STREAMS)[case]["body"].split("\n\n")]
    deltas = [json.loads(c)["choices"][0]["delta"] for c in chunks if c.startswith("{")]
    return "".join(d.get("content") or "" for d in deltas)


# -- 1. The cut stream and the complete ones, as captured ---------------------------------------


@pytest.mark.parametrize("case", ["complete_max_tokens_8", "complete_include_usage"])
def test_the_captured_complete_streams_are_answers(case: str) -> None:
    assert "usage" not in captured(STREAMS)[case]["body"]  # this server never reports usage
    done = run(chat(), served(case)).completed
    assert done.message.text == text_of(case) == "J0u'#@zU"
    assert done.stop_reason == "max_tokens" and done.note == ""  # finish_reason "length"
    assert done.request_id == captured(STREAMS)[case]["headers"]["x-request-id"]


def test_the_captured_cut_stream_is_stream_interrupted() -> None:
    body = captured(STREAMS)["interrupted_by_second_request"]["body"]
    assert body.rstrip().endswith("data: [DONE]") and '"finish_reason": "' not in body
    result = run(chat(), served("interrupted_by_second_request"))
    assert isinstance(result.error, StreamInterrupted)
    assert classify(result.error) is Action.RETRY
    message = str(result.error)
    assert "ended with data: [DONE] but with neither a finish_reason nor a usage report" in message
    assert "trust_end_marker=True" in message  # the one setting that accepts such streams
    assert not any(isinstance(p, Completed) for p in result.parts)


def sequence(*cases: str) -> tuple[list[httpx.Request], Any]:
    """A server answering each request with the next captured case (the last one repeats)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return served(cases[min(len(seen), len(cases)) - 1])(request)

    return seen, handler


def agent_on(handler: Any, **kw: Any) -> Agent:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider(
        "tiny", api_key=None, base_url="http://127.0.0.1:8000/v1", client=client, **kw
    )
    return Agent(provider, retry=FAST, limiter=False)


def test_the_cut_stream_is_retried_and_its_partial_text_discarded() -> None:
    seen, handler = sequence("interrupted_by_second_request", "complete_max_tokens_8")
    agent = agent_on(handler)
    result = agent.run_sync("Write a long story.", show=False)
    assert result.final_text == "J0u'#@zU" and len(seen) == 2
    frame = agent.attempts
    assert frame["outcome"].tolist() == ["error", "ok"]
    assert frame["error_kind"].iloc[0] == "StreamInterrupted"
    assert frame["action"].tolist() == ["retry", "none"]
    assert frame["discarded_chars"].iloc[0] == len(text_of("interrupted_by_second_request"))
    assert [m.text for m in agent.history] == ["Write a long story.", "J0u'#@zU"]


def test_a_server_that_never_reports_fails_after_its_retries_naming_the_setting() -> None:
    seen, handler = sequence("interrupted_by_second_request")
    agent = agent_on(handler)
    with pytest.raises(StreamInterrupted) as caught:
        agent.run_sync("Hi", show=False)
    assert len(seen) == FAST.max_attempts and agent.history == []
    assert "neither a finish_reason nor a usage report" in str(caught.value)
    assert "trust_end_marker=True" in str(caught.value)
    # the setting it names: the same stream is then the answer, in one attempt
    seen, handler = sequence("interrupted_by_second_request")
    trusting = agent_on(handler, trust_end_marker=True)
    result = trusting.run_sync("Hi", show=False)
    assert result.final_text == text_of("interrupted_by_second_request") and len(seen) == 1
    assert "no finish_reason; read as stop" in trusting.attempts["message"].iloc[0]


def test_the_setting_goes_through_resolve_model_and_is_checked() -> None:
    provider = resolve_model(
        "openai:tiny", base_url="http://127.0.0.1:8000/v1", trust_end_marker=True
    )
    assert isinstance(provider, OpenAIProvider) and provider.limits.trust_end_marker
    with pytest.raises(ConfigError, match="trust_end_marker must be True or False"):
        OpenAIProvider("tiny", api_key=None, trust_end_marker="yes")  # type: ignore[arg-type]


def test_a_whole_body_has_no_connection_to_cut() -> None:
    # a batch's answer with neither a finish_reason nor usage is still the answer: nothing cut it
    body = {
        "id": "c1",
        "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": None}],
    }
    provider = OpenAIProvider("tiny", api_key=None, base_url="http://127.0.0.1:8000/v1")
    done = asyncio.run(read_whole(provider, body))
    assert done.message.text == "hi" and done.stop_reason == "end_turn"


# -- 2. Two agents on one server that cuts a stream for the next request ------------------------

PROMPTS = ("Explain how a token bucket paces requests.", "Why do retries need jitter?")
PATIENT = RetryPolicy(initial_delay=0.01, max_delay=0.2, max_attempts=8, seed=3)


def mock_agent(server: MockServer, events: list[Event]) -> Agent:
    provider = OpenAIProvider("tiny", api_key=None, base_url=server.openai_base_url)
    return Agent(provider, retry=PATIENT, limiter=False, subscribers=[events.append])


@pytest.mark.e2e
def test_two_agents_on_one_interrupting_server_both_get_their_whole_answers() -> None:
    with MockServer() as plain:
        whole = [mock_agent(plain, []).run_sync(p, show=False).final_text for p in PROMPTS]
    # the first request stalls after a few deltas, so the second one arrives while it streams
    with MockServer(emulate="llama-cpp-python", faults=["stall=30"]) as server:
        events_a: list[Event] = []
        events_b: list[Event] = []
        a, b = mock_agent(server, events_a), mock_agent(server, events_b)

        async def main() -> tuple[str, str]:
            first = asyncio.create_task(a.run(PROMPTS[0], show=False))
            while not any(isinstance(e, TextDelta) for e in events_a):
                await asyncio.sleep(0.01)
                assert not first.done(), first
            second = await b.run(PROMPTS[1], show=False)
            return (await first).final_text, second.final_text

        answers = asyncio.run(main())
    assert list(answers) == whole  # both in full, neither the cut text
    for agent, prompt, text in ((a, PROMPTS[0], whole[0]), (b, PROMPTS[1], whole[1])):
        assert [m.text for m in agent.history] == [prompt, text]
    frame = a.attempts
    assert frame["error_kind"].iloc[0] == "StreamInterrupted"  # cut by b's request
    assert "neither a finish_reason nor a usage report" in frame["message"].iloc[0]
    assert 0 < frame["discarded_chars"].iloc[0] < len(whole[0])
    assert frame["outcome"].iloc[-1] == "ok"


def test_emulate_names_a_known_server() -> None:
    with pytest.raises(ValueError, match="emulate='llama.cpp'"):
        MockServer(emulate="llama.cpp")
    assert (
        build_parser().parse_args(["--emulate", "llama-cpp-python"]).emulate == "llama-cpp-python"
    )


# -- 3. response_format: json_schema refused, json_object with the schema taken -----------------


def refused(case: str) -> dict[str, Any]:
    c: dict[str, Any] = captured(REFUSED)[case]
    return c


@pytest.mark.parametrize("case", ["refused_json_schema", "fastapi_default_422"])
def test_a_request_validation_body_is_a_bad_request_naming_the_field(case: str) -> None:
    c = refused(case)
    # the server's own verdict changes nothing: the request is what is wrong
    err = error_from_response(
        "openai", c["status"], json.dumps(c["body"]), {"x-should-retry": "true"}
    )
    assert isinstance(err, BadRequest) and isinstance(err, SchemaRejected)
    assert classify(err) is Action.FAIL and err.status_code == c["status"]
    assert "response_format.type: Input should be 'text' or 'json_object'" in str(err)
    assert "validation error:" not in str(err)  # FastAPI's dump is read, not repeated


@pytest.mark.parametrize("status", [400, 422, 500, 503])
def test_any_validation_body_is_final_whatever_the_status(status: int) -> None:
    issue = {"type": "missing", "loc": ("body", "messages", 0, "role"), "msg": "Field required"}
    message = f"1 validation error:\n  {issue}\n\n  Endpoint: POST /v1/chat/completions"
    body = {"error": {"message": message, "type": "internal_server_error", "param": None}}
    err = error_from_response("openai", status, json.dumps(body), {})
    assert type(err) is BadRequest and classify(err) is Action.FAIL
    assert "messages.0.role: Field required" in str(err)


def test_a_5xx_or_422_that_is_no_validation_error_stays_what_it_was() -> None:
    plain = {"error": {"message": "llama_decode returned -1", "type": "internal_server_error"}}
    assert classify(error_from_response("openai", 500, json.dumps(plain), {})) is Action.RETRY
    other = {"detail": [{"type": "missing", "loc": ["query", "key"], "msg": "Field required"}]}
    assert not isinstance(error_from_response("openai", 503, json.dumps(other), {}), BadRequest)


@pytest.fixture(scope="module")
def llama_cpp_python() -> Iterator[MockServer]:
    with MockServer(emulate="llama-cpp-python") as server:
        yield server


def post(server: MockServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.openai_url, json=body, timeout=30)


@pytest.mark.e2e
def test_the_emulating_mock_answers_as_the_real_server(llama_cpp_python: MockServer) -> None:
    c = refused("refused_json_schema")
    answer = post(llama_cpp_python, c["request"])
    assert answer.status_code == 500 and answer.json() == c["body"]
    taken = post(llama_cpp_python, refused("accepted_json_object_with_schema")["request"])
    assert taken.status_code == 200 and "usage" not in taken.text  # not even when asked
    chunks = [
        json.loads(line[6:]) for line in taken.text.split("\n\n") if line.startswith("data: {")
    ]
    answer_text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks)
    assert set(json.loads(answer_text)) == {"verdict", "reason"}  # in the schema it was sent


class Verdict(BaseModel):
    """A verdict, with its reason."""

    verdict: Literal["guilty", "not guilty"]
    reason: str


@pytest.mark.e2e
def test_auto_mode_takes_the_form_the_server_takes_and_keeps_it(
    llama_cpp_python: MockServer,
) -> None:
    before = len(llama_cpp_python.requests)
    agent = Agent(
        "openai:tiny", base_url=llama_cpp_python.openai_base_url, output=Verdict, limiter=False
    )
    result = agent.run_sync("Is the defendant guilty?", show=False)
    assert isinstance(result.output, Verdict)
    sent = llama_cpp_python.requests[before:]
    assert [(r.status, r.body["response_format"]["type"]) for r in sent] == [
        (500, "json_schema"),
        (200, "json_object"),
    ]
    assert sent[1].body["response_format"]["schema"]["required"] == ["verdict", "reason"]
    frame = agent.attempts
    assert frame["action"].tolist() == ["retry", "none"]  # one refused attempt, no wait
    assert frame["error_kind"].iloc[0] == "SchemaRejected" and frame["delay_s"].iloc[0] == 0
    assert "trying native, json_object with the schema" in frame["message"].iloc[0]
    assert "json_object with the schema" in frame["message"].iloc[1]
    table = summary(frame)
    assert ("SchemaRejected", "retry") in set(
        zip(table["error_kind"], table["action"], strict=True)
    )
    # the provider keeps what worked: the next run sends that form first
    agent.run_sync("And the accomplice?", show=False)
    last = llama_cpp_python.requests[-1]
    assert last.body["response_format"]["type"] == "json_object" and last.status == 200
    assert len(llama_cpp_python.requests) == before + 3
    assert "(the server refused json_schema)" in agent.attempts["message"].iloc[-1]


@pytest.mark.e2e
def test_native_mode_still_fails_naming_the_modes_that_would_work(
    llama_cpp_python: MockServer,
) -> None:
    before = len(llama_cpp_python.requests)
    agent = Agent(
        "openai:tiny",
        base_url=llama_cpp_python.openai_base_url,
        output=Verdict,
        output_mode="native",
        limiter=False,
    )
    with pytest.raises(SchemaRejected) as caught:
        agent.run_sync("Is the defendant guilty?", show=False)
    assert len(llama_cpp_python.requests) == before + 1  # never retried
    said = str(caught.value)
    assert "response_format.type: Input should be 'text' or 'json_object'" in said
    assert "output_mode='auto'" in said and "'tool'" in said
    assert agent.history == []


def test_when_every_native_form_is_refused_auto_ends_in_tool_mode() -> None:
    bodies: list[dict[str, Any]] = []
    refusal = {"error": {"message": "response_format is not supported", "param": "response_format"}}
    call = {"index": 0, "id": "c1", "type": "function"}
    answer = json.dumps({"verdict": "guilty", "reason": "seen"})
    stream = (
        "".join(
            f"data: {json.dumps({'choices': [{'index': 0, 'delta': d, 'finish_reason': f}]})}\n\n"
            for d, f in (
                (
                    {
                        "tool_calls": [
                            {**call, "function": {"name": "final_answer", "arguments": answer}}
                        ]
                    },
                    None,
                ),
                ({}, "tool_calls"),
            )
        )
        + "data: [DONE]\n\n"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if "response_format" in bodies[-1]:
            return httpx.Response(400, json=refusal)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream)

    agent = agent_on(handler)
    result = agent.run_sync("Is the defendant guilty?", show=False, output=Verdict)
    assert result.output == Verdict(verdict="guilty", reason="seen")
    kinds = [b.get("response_format", {}).get("type") or b["tool_choice"] for b in bodies]
    assert (
        kinds[:2] == ["json_schema", "json_object"]
        and kinds[2]["function"]["name"] == "final_answer"
    )
    assert agent.attempts["action"].tolist() == ["retry", "retry", "none"]
    assert "trying tool" in agent.attempts["message"].iloc[1]
