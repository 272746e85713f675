"""A run with `output=`: the answer checked before it is committed, a wrong shape reasked within
`output_retries` (compactly: the reask's prompt does not grow), truncation and refusal never
reasked, and every attempt's tokens counted. Scripted models, virtual time."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from nbagent import (
    Agent,
    Budget,
    Message,
    OutputInvalid,
    OutputTruncated,
    Reply,
    RetryPolicy,
    ScriptedModel,
    ToolUse,
    VirtualClock,
    fault,
    tool,
)
from nbagent import errors as E
from nbagent.events import AttemptFailed, Event, RunFinished
from nbagent.providers import ModelRequest


class Person(BaseModel):
    name: str
    age: int = Field(ge=0)


GOOD = '{"name": "Ann", "age": 31}'
OFF = '{"name": "Ann", "age": "thirty-one"}'


def agent(script: list[Any], **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kw.setdefault("output", Person)
    return Agent(model, limiter=False, clock=VirtualClock(), **kw), model


def run(a: Agent, prompt: str = "Who is she?", **kw: Any) -> Any:
    return asyncio.run(a.run(prompt, show=False, **kw))


def rows(a: Agent) -> list[dict[str, Any]]:
    cols = ["turn", "attempt", "outcome", "action", "error_kind", "status_code", "message"]
    cols += ["input_tokens", "output_tokens"]
    return a.attempts[cols].to_dict("records")  # type: ignore[no-any-return]


def test_an_answer_off_its_schema_is_reasked_and_the_good_one_is_the_output() -> None:
    a, model = agent([OFF, GOOD])
    result = run(a)
    assert result.output == Person(name="Ann", age=31)
    assert result.final_text == GOOD and result.reasks == 1
    log = rows(a)
    assert [(r["turn"], r["attempt"], r["action"]) for r in log] == [
        (1, 1, "reask"),
        (1, 1, "none"),
    ]
    reask = log[0]
    assert reask["error_kind"] == "OutputInvalid" and reask["status_code"] == 200
    assert reask["message"].startswith("age: Input should be a valid integer")
    assert (reask["input_tokens"], reask["output_tokens"]) == (10, 5)  # that answer's own cost
    # the run's usage counts both answers, the refused one included
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (
        2,
        20,
        10,
    )
    # only the good answer is committed
    assert [m.text for m in a.history] == ["Who is she?", GOOD]


def test_the_reask_sends_the_errors_not_the_answer_repeated() -> None:
    a, model = agent([OFF, GOOD])
    run(a)
    asked = model.requests[1].messages
    assert [m.role for m in asked] == ["user", "assistant", "user"]
    assert asked[1].text == OFF
    errors = asked[2].text
    assert errors.startswith("1 validation error:\n- age: Input should be a valid integer")
    assert OFF not in errors and "thirty-one" not in errors


def test_past_output_retries_the_run_fails_with_the_last_errors_and_history_is_kept() -> None:
    a, model = agent(["ok", *[OFF] * 3], output_retries=2)
    a.output = None  # a first run without a schema, so there is history to keep
    first = asyncio.run(a.run("hello", show=False))
    before = list(a.history)
    seen: list[Event] = []
    a.subscribe(seen.append)
    with pytest.raises(OutputInvalid) as caught:
        run(a, output=Person)
    err = caught.value
    assert err.raw == OFF and err.errors[0].path == "age" and "after 2 reasks" in str(err)
    assert a.history == before and first.output == first.final_text  # plain text: its text
    assert len(model.requests) == 4  # the first run, then one answer and two reasks
    actions = [e.action for e in seen if isinstance(e, AttemptFailed)]
    assert actions == ["reask", "reask", "fail"]
    end = [e for e in seen if isinstance(e, RunFinished)][-1]
    assert end.error == "OutputInvalid" and end.usage.requests == 3  # every answer counted


def test_no_pydantic_error_escapes_and_zero_retries_fails_at_the_first_answer() -> None:
    a, model = agent(["not json at all"], output_retries=0)
    with pytest.raises(OutputInvalid) as caught:
        run(a)
    assert "not valid JSON" in str(caught.value) and len(model.requests) == 1
    with pytest.raises(E.ConfigError, match="output_retries"):
        Agent(ScriptedModel([]), output=Person, output_retries=-1)


def test_a_truncated_answer_is_never_reasked() -> None:
    a, model = agent([Reply('{"name": "An', stop_reason="max_tokens", output_tokens=64)])
    a.max_tokens = 64
    with pytest.raises(OutputTruncated) as caught:
        run(a)
    assert len(model.requests) == 1
    err = caught.value
    assert (err.limit, err.output_tokens, err.raw) == (64, 64, '{"name": "An')
    assert "raise max_tokens" in str(err)
    (row,) = rows(a)
    assert (row["action"], row["error_kind"], row["output_tokens"]) == (
        "fail",
        "OutputTruncated",
        64,
    )


def test_a_refusal_is_never_reasked() -> None:
    a, model = agent([fault("filtered", message="I can't help with that."), GOOD])
    with pytest.raises(E.ContentFiltered, match="I can't help with that."):
        run(a)
    assert len(model.requests) == 1


def test_transport_retries_inside_a_reask_keep_their_own_count() -> None:
    policy = RetryPolicy(max_attempts=2, initial_delay=1, jitter=None)
    a, _ = agent([OFF, fault("503"), GOOD], retry=policy)
    result = run(a)
    assert result.output == Person(name="Ann", age=31)
    # the reask is a new request: its 503 is retried although two attempts came before it
    assert [(r["attempt"], r["action"]) for r in rows(a)] == [
        (1, "reask"),
        (1, "retry"),
        (2, "none"),
    ]


def test_each_row_says_which_answer_it_asked_for_in_its_reask_column(tmp_path: Any) -> None:
    from nbagent.analysis import read_attempts
    from nbagent.notebook._state import TimelineState

    policy = RetryPolicy(max_attempts=3, initial_delay=1, jitter=None)
    log = tmp_path / "attempts.sqlite"
    a, _ = agent([fault("429"), OFF, fault("503"), OFF, GOOD], retry=policy, log=str(log))
    state = TimelineState()
    a.subscribe(state)
    assert run(a).output == Person(name="Ann", age=31)
    seen = a.attempts[["reask", "attempt", "action"]].to_dict("records")
    # a 429 and a 503 mixed in: attempts read 1, 2, 1, 2, 1; the reask column tells the answers
    assert [(r["reask"], r["attempt"], r["action"]) for r in seen] == [
        (0, 1, "retry"),
        (0, 2, "reask"),
        (1, 1, "retry"),
        (1, 2, "reask"),
        (2, 1, "none"),
    ]
    bars = [b for b in state.snapshot()["bars"] if b["kind"] == "attempt"]
    assert [b["label"] for b in bars] == [
        "attempt 1/3",
        "attempt 2/3",
        "reask 1, attempt 1/3",
        "reask 1, attempt 2/3",
        "reask 2, attempt 1/3",
    ]
    asyncio.run(a.aclose())  # the durable log's writer commits what it has queued
    assert read_attempts(log)["reask"].tolist() == [0, 0, 1, 1, 2]  # the durable log keeps it


def test_the_budgets_count_a_reask_as_a_turn() -> None:
    a, _ = agent([OFF, GOOD], budget=Budget(max_turns=1))
    with pytest.raises(E.BudgetExceeded) as caught:
        run(a)
    assert caught.value.limit == "max_turns"
    tokens, _ = agent([OFF, OFF, GOOD], budget=Budget(max_total_tokens=25))
    with pytest.raises(E.BudgetExceeded) as spent:
        run(tokens)
    assert spent.value.limit == "max_total_tokens" and spent.value.actual == 30


def test_the_schema_of_a_run_overrides_the_agents() -> None:
    class Pet(BaseModel):
        species: str

    a, _ = agent([GOOD, '{"species": "cat"}', "plain text"])
    assert run(a).output == Person(name="Ann", age=31)
    assert run(a, output=Pet).output == Pet(species="cat")
    a.output = None
    plain = run(a)
    assert plain.output == plain.final_text == "plain text"


def test_a_json_schema_dict_gives_a_dict() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    a, _ = agent(['{"n": "x"}', '{"n": 4}'], output=schema)
    result = run(a)
    assert result.output == {"n": 4} and result.reasks == 1


def test_an_output_validator_refusing_is_reasked_like_a_schema_error() -> None:
    a, model = agent(['{"name": "ann", "age": 3}', '{"name": "Ann", "age": 3}'])

    @a.output_validator
    def capitalised(person: Person) -> Person:
        if not person.name[:1].isupper():
            raise ValueError("the name must start with a capital letter")
        return person

    result = run(a)
    assert result.output.name == "Ann"
    assert "the name must start with a capital letter" in model.requests[1].messages[-1].text


def test_tools_first_then_the_structured_answer() -> None:
    @tool
    def lookup(name: str) -> str:
        """Look a person up."""
        return f"{name} is 31"

    script = [Reply(tool_calls=[ToolUse("lookup", {"name": "Ann"})]), GOOD]
    a, model = agent(script, tools=[lookup])
    result = run(a)
    assert result.output.age == 31 and result.turns == 2
    assert [m.role for m in a.history] == ["user", "assistant", "user", "assistant"]
    assert model.requests[0].output is not None and model.requests[0].output.mode == "native"


def test_tool_mode_reasks_with_a_tool_result_and_leaves_a_well_formed_history() -> None:
    bad = Reply(tool_calls=[ToolUse("final_answer", {"name": "Ann", "age": -1}, id="c1")])
    good = Reply(tool_calls=[ToolUse("final_answer", {"name": "Ann", "age": 1}, id="c2")])
    a, model = agent([bad, good], output_mode="tool")
    result = run(a)
    assert result.output == Person(name="Ann", age=1)
    assert json.loads(result.final_text) == {"name": "Ann", "age": 1}
    first = model.requests[0]
    assert first.output is not None and first.output.mode == "tool"
    assert [t.name for t in first.tools] == ["final_answer"]
    (reask,) = model.requests[1].messages[-1].tool_results
    assert reask.tool_use_id == "c1" and reask.is_error and "age" in reask.text
    # the answer's call has its result, so the next prompt follows a well-formed history
    assert [m.role for m in a.history] == ["user", "assistant", "user"]
    assert a.history[-1].tool_results[0].tool_use_id == "c2"


def test_tool_mode_refuses_a_tool_of_the_users_with_the_answers_name() -> None:
    @tool
    def final_answer(x: str) -> str:
        """Mine."""
        return x

    with pytest.raises(E.ConfigError, match="final_answer"):
        Agent(ScriptedModel([]), tools=[final_answer], output=Person)


def test_prompted_mode_puts_the_schema_in_the_system_prompt() -> None:
    a, model = agent(["```json\n" + GOOD + "\n```"], output_mode="prompted", system="Be brief.")
    result = run(a)
    assert result.output == Person(name="Ann", age=31)
    sent: ModelRequest = model.requests[0]
    assert sent.system is not None and sent.system.startswith("Be brief.")
    assert '"required":["name","age"]' in sent.system
    assert sent.output is not None and sent.output.mode == "prompted"


def test_an_unknown_mode_is_a_config_error() -> None:
    with pytest.raises(E.ConfigError, match="output_mode takes"):
        Agent(ScriptedModel([]), output=Person, output_mode="json")  # type: ignore[arg-type]


def test_the_mode_used_is_said_in_the_attempt_log() -> None:
    a, _ = agent([GOOD])
    run(a)
    assert rows(a)[-1]["message"] == "structured answer (output_mode=auto: native)"


def test_run_sync_and_start_take_a_schema_too() -> None:
    a, _ = agent([GOOD, GOOD], output=None)
    assert a.run_sync("x", show=False, output=Person).output == Person(name="Ann", age=31)

    async def background() -> Any:
        return await a.start("x", show=False, output=Person)

    assert asyncio.run(background()).output.age == 31


def test_history_messages_a_reask_added_are_not_sent_twice() -> None:
    a, model = agent([OFF, OFF, GOOD], output_retries=3)
    run(a)
    third = model.requests[2].messages
    # only the latest failed answer rides along: user, answer, errors
    assert [m.role for m in third] == ["user", "assistant", "user"]
    assert isinstance(third[0], Message) and third[0].text == "Who is she?"


def test_a_paused_turn_is_continued_before_its_answer_is_checked() -> None:
    a, model = agent([Reply("Searching", stop_reason="pause_turn"), Reply(GOOD)])
    result = run(a)
    assert result.output == Person(name="Ann", age=31) and result.reasks == 0
    assert len(model.requests) == 2
    # the paused part and its continuation are one assistant message, as without output=
    assert [m.role for m in a.history] == ["user", "assistant"]
    assert a.history[1].text == "Searching" + GOOD
