"""OpenTelemetry tracing: real agents in virtual time, spans caught by the SDK's in-memory exporter.

One faulty run (a 503, a 429 with Retry-After, a tool that raises, a context overflow that is
summarised) must come out as the GenAI conventions' span tree: one `invoke_agent` span, one
`chat {model}` span per attempt (retries are siblings, their gaps the waits the attempt log
shows), one `execute_tool {name}` span per call, and the waits as events with their delays.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import nbagent
from nbagent import (
    Agent,
    ContextOverflow,
    Reply,
    RetryPolicy,
    ScriptedModel,
    Summarize,
    ToolUse,
    VirtualClock,
    fault,
    tool,
)
from nbagent import errors as E

LONG = "first " + "q" * 16_000  # about 4,000 tokens: over the 3,000 the overflow names


@tool
def broken(x: int) -> str:
    """A tool whose handler always raises."""
    raise ValueError(f"cannot handle {x}")


@tool
def echo(text: str) -> str:
    """Return the text."""
    return f"echo: {text}"


def overflow() -> ContextOverflow:
    return ContextOverflow(
        "prompt is too long: 5000 tokens > 3000 maximum",
        tokens=5000,
        limit=3000,
        provider="scripted",
        status_code=400,
        request_id="req_over",
    )


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    yield exp, provider
    provider.shutdown()


def faulty_agent(**kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(["answer 1"])
    agent = Agent(
        model,
        clock=VirtualClock(),
        retry=RetryPolicy(seed=0),
        tools=[broken, echo],
        limiter=False,
        compaction=Summarize(),
        **kw,
    )
    return agent, model


def faulty_run(agent: Agent, model: ScriptedModel) -> Any:
    agent.run_sync(LONG, show=False)  # a first turn for the summary to shorten later
    model.add(
        fault("503"),
        fault("429", retry_after=2.0),
        Reply("Let me try.", tool_calls=[ToolUse("broken", {"x": 7}, id="call_1")]),
        overflow(),
        "They asked a long question.",  # the summary request
        "done",
    )
    return agent.run_sync("second", show=False)


def tree(spans: tuple[ReadableSpan, ...], run_id: str) -> tuple[ReadableSpan, list[ReadableSpan]]:
    (root,) = [s for s in spans if (s.attributes or {}).get("nbagent.run_id") == run_id]
    children = [
        s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id
    ]
    return root, sorted(children, key=lambda s: (s.start_time or 0, s.end_time or 0))


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def seconds(ns: int | None, origin: int | None) -> float:
    assert ns is not None and origin is not None
    return (ns - origin) / 1e9


@pytest.fixture
def traced(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> tuple[Agent, Any, ReadableSpan, list[ReadableSpan]]:
    """The faulty run, traced: the agent, its result, the run span and its children."""
    exp, provider = exporter
    agent, model = faulty_agent()
    with nbagent.instrument(provider):
        result = faulty_run(agent, model)
    return agent, result, *tree(exp.get_finished_spans(), result.run_id)


def test_a_faulty_run_is_one_invoke_agent_span_with_an_attempt_span_per_try(
    traced: tuple[Agent, Any, ReadableSpan, list[ReadableSpan]],
) -> None:
    agent, result, root, children = traced
    assert result.final_text == "done"

    assert root.name == "invoke_agent" and root.kind is SpanKind.INTERNAL and root.parent is None
    run = attrs(root)
    assert run["gen_ai.operation.name"] == "invoke_agent"
    assert run["gen_ai.provider.name"] == "scripted"
    assert run["gen_ai.request.model"] == "scripted-model"
    assert run["gen_ai.agent.id"] == agent.agent_id
    assert run["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    assert run["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    assert run["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert "error.type" not in run and root.status.status_code is not StatusCode.ERROR

    shape = [
        (
            s.name,
            attrs(s).get("nbagent.phase"),
            attrs(s).get("nbagent.attempt"),
            attrs(s).get("error.type"),
        )
        for s in children
    ]
    assert shape == [
        ("chat scripted-model", "request", 1, "ServerError"),
        ("chat scripted-model", "request", 2, "RateLimited"),
        ("chat scripted-model", "request", 3, None),
        ("execute_tool broken", None, None, "raised"),
        ("chat scripted-model", "request", 1, "ContextOverflow"),
        ("chat scripted-model", "compaction", 1, None),
        ("chat scripted-model", "request", 2, None),
    ]
    s503, s429, ok, tool_span, over, summary, last = children
    assert all(s.context.trace_id == root.context.trace_id for s in children)
    assert {s.kind for s in children if s.name.startswith("chat")} == {SpanKind.CLIENT}
    assert tool_span.kind is SpanKind.INTERNAL

    # failed attempts: the typed error, the action, the status, the wait as an event
    a503 = attrs(s503)
    assert a503["http.response.status_code"] == 503 and a503["nbagent.action"] == "retry"
    assert s503.status.status_code is StatusCode.ERROR
    (wait1,) = s503.events
    assert wait1.name == "nbagent.retry_scheduled"
    w1 = dict(wait1.attributes or {})
    assert w1["nbagent.attempt"] == 1 and w1["nbagent.next_attempt"] == 2
    assert w1["nbagent.action"] == "retry" and "nbagent.retry_after_s" not in w1
    (wait2,) = s429.events
    w2 = dict(wait2.attributes or {})
    assert w2["nbagent.retry_after_s"] == 2.0 and w2["nbagent.delay_s"] == 2.0
    assert attrs(s429)["http.response.status_code"] == 429
    assert attrs(over)["nbagent.action"] == "compact"

    # the successful attempt: usage, finish reason, the id the provider gave
    a_ok = attrs(ok)
    assert a_ok["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert a_ok["gen_ai.usage.input_tokens"] == 10 and a_ok["gen_ai.usage.output_tokens"] == 5
    assert a_ok["gen_ai.response.id"].startswith("msg_scripted_")  # the reply's id
    assert attrs(last)["gen_ai.response.finish_reasons"] == ("end_turn",)

    # the tool error
    t = attrs(tool_span)
    assert t["gen_ai.operation.name"] == "execute_tool" and t["gen_ai.tool.name"] == "broken"
    assert t["gen_ai.tool.call.id"] == "call_1" and t["nbagent.action"] == "tool_result"
    assert tool_span.status.status_code is StatusCode.ERROR

    # compaction shows on the run span
    names = [e.name for e in root.events]
    assert names == ["nbagent.compaction.started", "nbagent.compaction.finished"]
    done = dict(root.events[1].attributes or {})
    assert done["nbagent.compaction.strategy"] == "summarize" and done["nbagent.ok"] is True


def test_span_times_follow_the_attempt_log_so_the_gaps_are_the_waits(
    traced: tuple[Agent, Any, ReadableSpan, list[ReadableSpan]],
) -> None:
    agent, result, root, children = traced
    df = agent.attempts
    rows = df[(df.run_id == result.run_id)].reset_index(drop=True)
    origin = root.start_time
    t0 = float(rows.started_at.min())
    assert len(rows) == len(children)
    for span, (_, row) in zip(children, rows.iterrows(), strict=True):
        assert seconds(span.start_time, origin) == pytest.approx(row.started_at - t0, abs=1e-6)
        assert seconds(span.end_time, origin) == pytest.approx(row.ended_at - t0, abs=1e-6)
    s503, s429, ok = children[:3]
    # sibling attempts, separated by exactly the waits announced on them
    gap1 = seconds(s429.start_time, s503.end_time)
    gap2 = seconds(ok.start_time, s429.end_time)
    assert gap1 == pytest.approx(dict(s503.events[0].attributes or {})["nbagent.delay_s"])
    assert gap2 == pytest.approx(2.0)


def test_content_is_recorded_only_when_asked_for(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exp, provider = exporter
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }

    def one_run() -> tuple[ReadableSpan, list[ReadableSpan]]:
        exp.clear()
        model = ScriptedModel(
            [Reply("Checking.", tool_calls=[ToolUse("echo", {"text": "secret plan"})]), "All good."]
        )
        agent = Agent(model, clock=VirtualClock(), tools=[echo, broken], limiter=False)
        result = agent.run_sync("What is the secret plan?", show=False)
        return tree(exp.get_finished_spans(), result.run_id)

    with nbagent.instrument(provider):
        root, children = one_run()
    for span in (root, *children):
        assert not content_keys & set(attrs(span))
        assert "secret plan" not in json.dumps(attrs(span), default=str)

    with nbagent.instrument(provider, capture_content=True):
        root, children = one_run()
    (inp,) = json.loads(attrs(root)["gen_ai.input.messages"])
    assert inp == {
        "role": "user",
        "parts": [{"type": "text", "content": "What is the secret plan?"}],
    }
    (out,) = json.loads(attrs(root)["gen_ai.output.messages"])
    assert out["parts"] == [{"type": "text", "content": "All good."}]
    first_chat, tool_span, _ = children
    (reply,) = json.loads(attrs(first_chat)["gen_ai.output.messages"])
    assert reply["parts"][0] == {"type": "text", "content": "Checking."}
    assert reply["parts"][1]["type"] == "tool_call" and reply["parts"][1]["name"] == "echo"
    assert reply["parts"][1]["arguments"] == {"text": "secret plan"}
    assert json.loads(attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"text": "secret plan"}
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "echo: secret plan"


def test_a_hard_failure_marks_the_run_span_with_the_typed_error(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exp, provider = exporter
    agent = Agent(ScriptedModel([fault("401")]), clock=VirtualClock(), limiter=False)
    with nbagent.instrument(provider), pytest.raises(E.AuthFailed):
        agent.run_sync("hi", show=False)
    (root,) = [s for s in exp.get_finished_spans() if s.name == "invoke_agent"]
    (chat,) = [s for s in exp.get_finished_spans() if s.name.startswith("chat")]
    assert (
        attrs(root)["error.type"] == "AuthFailed" and attrs(root)["nbagent.end_reason"] == "error"
    )
    assert root.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "AuthFailed" and attrs(chat)["nbagent.action"] == "fail"
    assert chat.parent is not None and chat.parent.span_id == root.context.span_id


def test_each_request_span_says_which_answer_it_asked_for(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    from pydantic import BaseModel

    class Age(BaseModel):
        age: int

    exp, provider = exporter
    script = [fault("503"), '{"age": "x"}', '{"age": "y"}', '{"age": 3}']
    agent = Agent(ScriptedModel(script), clock=VirtualClock(), limiter=False, output=Age)
    with nbagent.instrument(provider):
        agent.run_sync("How old?", show=False)
    chats = sorted(
        (s for s in exp.get_finished_spans() if s.name.startswith("chat")),
        key=lambda s: s.start_time or 0,
    )
    seen = [(attrs(s)["nbagent.reask"], attrs(s)["nbagent.attempt"]) for s in chats]
    assert seen == [(0, 1), (0, 2), (1, 1), (2, 1)]  # as the attempt log's reask column
    assert list(agent.attempts["reask"]) == [r for r, _ in seen]


def test_a_run_inside_the_callers_span_is_its_child(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exp, provider = exporter
    agent = Agent(ScriptedModel(["hello"]), clock=VirtualClock(), limiter=False)
    outer_span = provider.get_tracer("notebook").start_as_current_span("my analysis")
    with nbagent.instrument(provider), outer_span as outer:
        result = asyncio.run(agent.run("hi", show=False))
    root, _ = tree(exp.get_finished_spans(), result.run_id)
    assert root.parent is not None and root.parent.span_id == outer.get_span_context().span_id


def test_uninstrument_stops_and_a_second_instrument_replaces_the_first(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exp, provider = exporter
    agent = Agent(ScriptedModel(["a", "b", "c"]), clock=VirtualClock(), limiter=False)
    first = nbagent.instrument(provider)
    second = nbagent.instrument(provider)  # a notebook cell run twice
    assert not first.active and second.active
    agent.run_sync("one", show=False)
    assert [s.name for s in exp.get_finished_spans()].count("invoke_agent") == 1
    second.uninstrument()
    second.uninstrument()  # harmless
    agent.run_sync("two", show=False)
    assert [s.name for s in exp.get_finished_spans()].count("invoke_agent") == 1
    assert "off" in repr(second)


def test_bad_arguments_are_config_errors(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    with pytest.raises(E.ConfigError, match="TracerProvider"):
        nbagent.instrument("http://localhost:4318")
    with pytest.raises(E.ConfigError, match="capture_content"):
        nbagent.instrument(exporter[1], capture_content="yes")  # type: ignore[arg-type]


def test_without_opentelemetry_instrument_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(sys.modules):
        if name.startswith("opentelemetry") or name == "nbagent.tracing._spans":
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails, as if not installed
    with pytest.raises(E.ConfigError, match=r"pip install 'nbagent-loop\[otel\]'"):
        nbagent.instrument()


def test_importing_nbagent_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, nbagent\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_gen_ai_name_used_is_one_the_conventions_publish() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as published

    from nbagent.tracing import _semconv as S

    known = {
        v for k, v in vars(published).items() if k.startswith("GEN_AI_") and isinstance(v, str)
    }
    ours = {
        v
        for k, v in vars(S).items()
        if k.isupper() and isinstance(v, str) and v.startswith("gen_ai.")
    }
    assert ours and ours <= known, ours - known
    operations = {v.value for v in published.GenAiOperationNameValues}
    assert {S.INVOKE_AGENT, S.CHAT, S.EXECUTE_TOOL} <= operations
    providers = {v.value for v in published.GenAiProviderNameValues}
    assert S.provider_and_model("anthropic:claude-sonnet-4-0") == ("anthropic", "claude-sonnet-4-0")
    assert S.provider_and_model("openai:gpt-4o")[0] in providers
    assert S.provider_and_model("demo") == ("nbagent", "demo")
