"""The loop, in virtual time against a scripted model: every action of DESIGN's table."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from nbagent import (
    Agent,
    Budget,
    Message,
    Partial,
    Reply,
    RetryPolicy,
    ScriptedModel,
    ToolUse,
    VirtualClock,
    fault,
    tool,
)
from nbagent import errors as E
from nbagent.events import (
    AttemptFailed,
    BudgetWarning,
    Event,
    FallbackStarted,
    RetryScheduled,
    RunFinished,
)


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    allowed = set("0123456789+-*/(). ")
    if not set(expression) <= allowed:
        raise ValueError(f"cannot evaluate {expression!r}")
    return str(eval(expression))


def make(script: list[Any], **kw: Any) -> tuple[Agent, ScriptedModel, list[Event], VirtualClock]:
    model = ScriptedModel(script)
    events: list[Event] = []
    clock = kw.pop("clock", None) or VirtualClock()
    kw.setdefault("retry", RetryPolicy(seed=0))
    agent = Agent(model, clock=clock, subscribers=[events.append], **kw)
    return agent, model, events, clock


def run(agent: Agent, prompt: str = "hi") -> Any:
    return asyncio.run(agent.run(prompt, show=False))


def of(events: list[Event], cls: type[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def test_429_is_retried_then_succeeds_with_no_duplicate_message() -> None:
    agent, model, events, clock = make([fault("429"), "Hello!"])
    result = run(agent)
    assert result.final_text == "Hello!"
    assert [m.role for m in agent.history] == ["user", "assistant"]
    assert agent.history[1].text == "Hello!"
    assert len(model.requests) == 2
    assert model.requests[0].messages == model.requests[1].messages  # the same snapshot
    (retry,) = of(events, RetryScheduled)
    assert retry.error == "RateLimited" and retry.status_code == 429
    assert clock.now() == pytest.approx(retry.delay_s)


def test_500_retry_event_arrives_before_the_sleep_with_its_fields() -> None:
    clock = VirtualClock(auto_advance=False)
    agent, _, events, _ = make(
        [fault("500"), "ok"], clock=clock, retry=RetryPolicy(jitter=None, initial_delay=2.0)
    )

    async def main() -> None:
        task = asyncio.create_task(agent.run("hi", show=False))
        while clock.sleepers == 0:
            await asyncio.sleep(0)
        (retry,) = of(events, RetryScheduled)  # already delivered while the agent sleeps
        assert (retry.attempt, retry.next_attempt, retry.max_attempts) == (1, 2, 4)
        assert retry.delay_s == 2.0 and retry.status_code == 500
        assert retry.error == "ServerError" and retry.request_id == "req_scripted_500"
        clock.advance(2.0)
        await task

    asyncio.run(main())
    assert agent.history[-1].text == "ok"


def test_401_is_not_retried_and_history_is_untouched() -> None:
    agent, model, events, clock = make([fault("401"), "never"])
    agent.history = [Message.user("earlier"), Message.assistant("answer")]
    with pytest.raises(E.AuthFailed):
        run(agent)
    assert len(model.requests) == 1
    assert [m.text for m in agent.history] == ["earlier", "answer"]
    assert clock.now() == 0
    (failed,) = of(events, AttemptFailed)
    assert failed.action == "fail"
    assert of(events, RunFinished)[0].end_reason == "error"


def test_retry_after_is_honoured_and_a_far_one_is_final() -> None:
    agent, _, events, clock = make([fault("429", retry_after=7), "ok"])
    run(agent)
    assert clock.slept == [7.0]
    assert of(events, RetryScheduled)[0].retry_after_s == 7.0

    agent, model, _, clock = make([fault("429", retry_after=6300, provider="anthropic"), "x"])
    with pytest.raises(
        E.QuotaExceeded, match="Anthropic rate limit reached. Resets in 1 h 45 min."
    ):
        run(agent)
    assert clock.slept == [] and len(model.requests) == 1


def test_retries_are_bounded_by_max_attempts() -> None:
    agent, model, events, clock = make(
        [fault("503")] * 5, retry=RetryPolicy(max_attempts=3, jitter=None)
    )
    with pytest.raises(E.ServerError):
        run(agent)
    assert len(model.requests) == 3
    assert clock.slept == [0.5, 1.0]
    assert [e.action for e in of(events, AttemptFailed)] == ["retry", "retry", "fail"]


@pytest.mark.parametrize(
    ("kind", "retried"),
    [
        ("529", True),
        ("502", True),
        ("504", True),
        ("408", True),
        ("transport", True),
        ("stream", True),
        ("quota", False),
        ("403", False),
        ("404", False),
        ("400", False),
        ("invalid", False),
        ("filtered", False),
    ],
)
def test_each_provider_fault_gets_its_action(kind: str, retried: bool) -> None:
    agent, model, _, _ = make([fault(kind), "recovered"])
    if retried:
        assert run(agent).final_text == "recovered"
        assert len(model.requests) == 2
    else:
        with pytest.raises(E.ProviderError):
            run(agent)
        assert len(model.requests) == 1 and agent.history == []


def test_x_should_retry_false_stops_a_retryable_error() -> None:
    agent, model, _, _ = make([fault("503", should_retry=False), "x"])
    with pytest.raises(E.ServerError):
        run(agent)
    assert len(model.requests) == 1


def test_a_broken_stream_is_discarded_whole_and_reported() -> None:
    agent, _, events, _ = make(
        [Partial(fault("stream"), text="Hello wor", thinking="hmm"), "Hello world."]
    )
    run(agent)
    assert [m.text for m in agent.history] == ["hi", "Hello world."]
    (retry,) = of(events, RetryScheduled)
    assert retry.discarded_text == "Hello wor" and retry.discarded_thinking == "hmm"
    assert agent.attempts["discarded_chars"].tolist()[0] == len("Hello wor") + len("hmm")


@pytest.mark.parametrize(
    ("mode", "partial", "retried"),
    [
        ("never", Partial(fault("stream"), text="Hel"), False),
        ("never", Partial(fault("stream")), True),
        ("reasoning_only", Partial(fault("stream"), thinking="hmm"), True),
        ("reasoning_only", Partial(fault("stream"), text="Hel"), False),
        ("always", Partial(fault("stream"), text="Hel"), True),
    ],
)
def test_retry_after_partial_modes(mode: str, partial: Partial, retried: bool) -> None:
    agent, model, _, _ = make([partial, "done"], retry=RetryPolicy(retry_after_partial=mode))  # type: ignore[arg-type]
    if retried:
        assert run(agent).final_text == "done"
    else:
        with pytest.raises(E.StreamInterrupted):
            run(agent)
        assert agent.history == []


def test_empty_response_is_retried_at_most_once() -> None:
    agent, model, _, _ = make([Reply(), "fine"])
    assert run(agent).final_text == "fine"
    agent, model, _, _ = make([Reply(), Reply(), "never"])
    with pytest.raises(E.EmptyResponse):
        run(agent)
    assert len(model.requests) == 2


def test_context_overflow_compacts_once_and_retries() -> None:
    big = "x" * 40_000

    @tool
    def dump() -> str:
        """A tool with a huge output."""
        return big

    script: list[Any] = [Reply(tool_calls=[ToolUse("dump", {}, id="t1")]), Reply("seen it")]
    agent, model, events, _ = make(script, tools=[dump])
    run(agent, "dump it")
    # a later step overflows: the old tool output is shed, and the same request is retried
    model.add(fault("overflow"), "short again")
    assert run(agent, "more").final_text == "short again"
    resent = model.requests[-1].messages
    assert resent[2].tool_results[0].text == (
        "[tool output of dump, 40,000 chars, removed to fit the context window]"
    )
    assert big == agent.transcript[2].tool_results[0].text  # the transcript keeps everything
    assert "removed to fit" in agent.history[2].tool_results[0].text
    assert of(events, AttemptFailed)[-1].action == "compact"


def test_overflow_with_nothing_to_shed_hard_fails_with_token_counts() -> None:
    agent, model, _, _ = make([fault("overflow"), "x"])
    with pytest.raises(E.ContextOverflow) as info:
        run(agent)
    assert (info.value.tokens, info.value.limit) == (250000, 200000)
    assert len(model.requests) == 1 and agent.history == []


def test_unknown_tool_and_handler_error_become_results_and_the_model_continues() -> None:
    agent, model, events, _ = make(
        [
            Reply(
                tool_calls=[
                    ToolUse("delete_everything", {}),
                    ToolUse("calculator", {"expression": "import os"}),
                    ToolUse("calculator", {"expression": "6*7"}),
                ]
            ),
            "Sorry, 6*7 = 42.",
        ],
        tools=[calculator],
    )
    result = run(agent)
    assert result.final_text == "Sorry, 6*7 = 42." and result.turns == 2
    results = agent.history[2].tool_results
    assert [r.is_error for r in results] == [True, True, False]
    assert "Unknown tool `delete_everything`. Available tools: calculator." in results[0].text
    assert results[1].text.startswith("Tool execution failed for `calculator`: cannot evaluate")
    assert results[2].text == "42"
    # the model saw the error results on its next turn
    assert model.requests[1].messages[-1].tool_results == results
    tools = agent.attempts.query("phase == 'tool'")
    assert tools["action"].tolist() == ["tool_result", "tool_result", "none"]


def test_cancellation_during_backoff_ends_at_once_with_history_intact() -> None:
    clock = VirtualClock(auto_advance=False)
    agent, _, events, _ = make([fault("529"), "again"], clock=clock)
    agent.history = [Message.user("before"), Message.assistant("kept")]

    async def main() -> None:
        handle = agent.start("hi", show=False)
        while clock.sleepers == 0:
            await asyncio.sleep(0)
        handle.cancel()
        with pytest.raises(E.Aborted):
            await handle

    asyncio.run(main())
    assert [m.text for m in agent.history] == ["before", "kept"]
    assert clock.now() == 0  # no time passed: the sleep was abandoned
    assert of(events, RunFinished)[-1].end_reason == "cancelled"
    # and the agent can run again
    agent.clock = VirtualClock()
    assert run(agent).final_text == "again"


def test_max_tokens_without_content_resumes_then_gives_up() -> None:
    agent, model, _, _ = make([Reply(stop_reason="max_tokens"), "finally"])
    assert run(agent).final_text == "finally"
    agent, model, _, _ = make([Reply(stop_reason="max_tokens")] * 3, max_length_resumes=2)
    with pytest.raises(E.LengthResumeExhausted):
        run(agent)
    assert len(model.requests) == 3 and agent.history == []


def test_tool_json_cut_off_by_max_tokens_becomes_an_error_result() -> None:
    agent, _, _, _ = make(
        [
            Reply(
                tool_calls=[ToolUse("calculator", '{"expression": "1+')], stop_reason="max_tokens"
            ),
            "ok",
        ],
        tools=[calculator],
    )
    run(agent)
    (result,) = agent.history[2].tool_results
    assert result.is_error and "cut off because the reply hit max_tokens" in result.text


def test_a_subscriber_that_raises_is_a_host_error_and_history_stays() -> None:
    def broken(event: Event) -> None:
        if isinstance(event, RetryScheduled):
            raise RuntimeError("widget crashed")

    agent, _, _, _ = make([fault("500"), "ok"])
    agent.subscribe(broken)
    with pytest.raises(E.HostError, match="widget crashed"):
        run(agent)
    assert agent.history == []


def test_budgets_are_checked_after_each_turn() -> None:
    loop_forever = [
        Reply(
            tool_calls=[ToolUse("calculator", {"expression": "1"})],
            input_tokens=100,
            output_tokens=50,
        )
    ] * 10
    agent, _, _, _ = make(list(loop_forever), tools=[calculator], budget=Budget(max_turns=3))
    with pytest.raises(E.BudgetExceeded) as info:
        run(agent)
    assert (info.value.limit, info.value.actual, info.value.limit_value) == ("max_turns", 3, 3)
    assert len(agent.history) == 7  # three whole steps were committed before the cap

    agent, _, _, _ = make(
        list(loop_forever), tools=[calculator], budget=Budget(max_total_tokens=400)
    )
    with pytest.raises(E.BudgetExceeded, match="max_total_tokens is 450"):
        run(agent)


def test_cost_wins_over_tokens_when_both_trip() -> None:
    from nbagent._core._budget import Usage

    b = Budget(max_cost_usd=0.01, max_total_tokens=10)
    with pytest.raises(E.BudgetExceeded) as info:
        b.check(Usage(100, 100, cost_usd=0.5), turns=1, elapsed_s=0)
    assert info.value.limit == "max_cost_usd"


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"max_cost_usd": -1}, "max_cost_usd must be a positive number"),
        ({"max_turns": 0}, "max_turns must be a positive number"),
        ({"max_wall_s": "soon"}, "max_wall_s must be a number"),
        ({"max_turns_warning": 0}, "max_turns_warning must be a positive whole number"),
    ],
)
def test_bad_budgets_say_what_to_change(kwargs: dict[str, Any], fix: str) -> None:
    with pytest.raises(E.ConfigError, match=fix):
        Budget(**kwargs)


def test_wrap_up_note_tells_the_model_when_turns_run_out() -> None:
    script = [Reply(tool_calls=[ToolUse("calculator", {"expression": "1"})])] * 2 + ["done"]
    agent, model, events, _ = make(
        script, tools=[calculator], budget=Budget(max_turns=5, max_turns_warning=3)
    )
    run(agent)
    last_user = model.requests[-1].messages[-1]
    assert "3 turns left" in last_user.text
    assert of(events, BudgetWarning)


def test_wall_clock_deadline_skips_a_wait_that_would_pass_it() -> None:
    agent, model, _, clock = make([fault("429", retry_after=30), "x"], budget=Budget(max_wall_s=10))
    with pytest.raises(E.RateLimited):
        run(agent)
    assert clock.slept == []


def test_fallback_chain_moves_on_after_retries_or_missing_model() -> None:
    first = ScriptedModel([fault("503")] * 2, model="a")
    second = ScriptedModel([fault("404")], model="b")
    third = ScriptedModel(["from c"], model="c")
    events: list[Event] = []
    agent = Agent(
        [first, second, third],
        clock=VirtualClock(),
        subscribers=[events.append],
        retry=RetryPolicy(max_attempts=2),
    )
    result = run(agent)
    assert result.final_text == "from c" and result.model == "scripted:c"
    assert [(e.from_model, e.to_model) for e in of(events, FallbackStarted)] == [
        ("scripted:a", "scripted:b"),
        ("scripted:b", "scripted:c"),
    ]
    assert "fallback" in agent.attempts["action"].tolist()


def test_no_fallback_for_auth_or_overflow() -> None:
    for kind, exc in (
        ("401", E.AuthFailed),
        ("overflow", E.ContextOverflow),
        ("400", E.BadRequest),
    ):
        second = ScriptedModel(["never"])
        agent = Agent([ScriptedModel([fault(kind)]), second], clock=VirtualClock())
        with pytest.raises(exc):
            run(agent)
        assert second.requests == []


def test_running_out_of_script_is_its_own_error() -> None:
    agent, _, _, _ = make([])
    with pytest.raises(E.ScriptExhausted, match="no reply left"):
        run(agent)


def test_session_save_and_load_round_trip(tmp_path: Path) -> None:
    agent, _, _, _ = make(
        [Reply(tool_calls=[ToolUse("calculator", {"expression": "2*2"})]), "4"], tools=[calculator]
    )
    run(agent)
    agent.save(tmp_path / "s.json")
    other = Agent(ScriptedModel([]))
    other.load(tmp_path / "s.json")
    assert other.history == agent.history and other.transcript == agent.transcript


def test_run_sync_in_a_script_and_inside_a_running_loop() -> None:
    agent, _, _, _ = make(["one", "two"])
    assert agent.run_sync("a", show=False).final_text == "one"

    async def inside() -> str:  # a notebook cell: a loop is already running here
        return agent.run_sync("b", show=False).final_text

    assert asyncio.run(inside()) == "two"
    assert [m.text for m in agent.history] == ["a", "one", "b", "two"]


def test_bad_agent_arguments_say_what_to_change() -> None:
    with pytest.raises(E.ConfigError, match="max_tokens must be a positive"):
        Agent(ScriptedModel([]), max_tokens=0)
    with pytest.raises(E.ConfigError, match="retry= takes a RetryPolicy"):
        Agent(ScriptedModel([]), retry={"max_attempts": 3})  # type: ignore[arg-type]
    with pytest.raises(E.ConfigError, match="model= takes a model string"):
        Agent(42)  # type: ignore[arg-type]


def test_a_failing_session_save_is_a_host_error(tmp_path: Path) -> None:
    agent, _, _, _ = make(["hi"])
    run(agent)
    with pytest.raises(E.HostError, match="saving the session"):
        agent.save(tmp_path / "no-such-folder" / "s.json")


def test_async_with_closes_the_providers() -> None:
    model = ScriptedModel(["hi"])

    async def main() -> None:
        async with Agent(model, clock=VirtualClock()) as agent:
            await agent.run("hello", show=False)
        assert model.closed

    asyncio.run(main())


def test_a_paused_turn_is_sent_back_and_continued_into_one_reply() -> None:
    agent, model, events, _ = make(
        [Reply("Searching the web", stop_reason="pause_turn"), "…and here is what I found."]
    )
    result = run(agent)
    assert result.final_text == "Searching the web…and here is what I found."
    assert [m.role for m in agent.history] == ["user", "assistant"]  # one reply, not two
    # the continuation request carried the paused reply back, unchanged, as the last message
    continued = model.requests[1].messages
    assert [m.role for m in continued] == ["user", "assistant"]
    assert continued[-1].text == "Searching the web"
    assert of(events, RunFinished)[-1].end_reason == "end_turn"


def test_a_failure_after_a_pause_leaves_history_as_before_the_step() -> None:
    agent, model, _, _ = make([Reply("partial work", stop_reason="pause_turn"), fault("401")])
    with pytest.raises(E.AuthFailed):
        run(agent)
    assert agent.history == []


def test_setting_a_new_retry_policy_reseeds_the_jitter() -> None:
    def first_delay(agent: Agent) -> float:
        events: list[Event] = []
        agent.subscribe(events.append)
        run(agent)
        return of(events, RetryScheduled)[0].delay_s

    agent, model, _, _ = make([fault("503"), "ok"], retry=RetryPolicy(seed=1))
    one = first_delay(agent)
    model.add(fault("503"), "ok")
    agent.retry = RetryPolicy(seed=1)  # the same seed again: the same draws again
    assert first_delay(agent) == one
