"""Bad configuration: every wrong argument a user can plausibly pass gets one clear sentence.

Each case names the argument the message must mention. The error is a `ConfigError` (the mock
server's fault grammar answers with `ValueError`, its documented contract), raised before
anything is sent, with a single line of text that names what to change — never a bare
`TypeError` from deep inside.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from nbagent import (
    Agent,
    Budget,
    Message,
    RetryPolicy,
    ScriptedModel,
    VirtualClock,
    fault,
    tool,
)
from nbagent.errors import ConfigError
from nbagent.providers._anthropic import AnthropicProvider
from nbagent.providers._models import resolve_model
from nbagent.providers._openai_chat import OpenAIProvider


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return expression


def _scripted(**kw: Any) -> Agent:
    kw.setdefault("clock", VirtualClock())
    return Agent(ScriptedModel(["ok"]), **kw)


def _tool_from_source(source: str) -> Any:
    scope: dict[str, Any] = {"tool": tool}
    exec(source, scope)
    return tool(scope["f"])


def _sock_param() -> None:
    import socket

    def f(a: socket.socket) -> str:
        """Uses a socket."""
        return ""

    tool(f)


CASES: list[tuple[str, Callable[[], Any], str]] = [
    # budgets
    ("negative cost budget", lambda: Budget(max_cost_usd=-1), "max_cost_usd"),
    ("zero wall budget", lambda: Budget(max_wall_s=0), "max_wall_s"),
    ("negative turns", lambda: Budget(max_turns=-3), "max_turns"),
    ("fractional turns", lambda: Budget(max_turns=2.5), "max_turns"),
    ("boolean turns", lambda: Budget(max_turns=True), "max_turns"),
    ("tokens as words", lambda: Budget(max_total_tokens="lots"), "max_total_tokens"),
    ("NaN cost", lambda: Budget(max_cost_usd=float("nan")), "max_cost_usd"),
    ("zero turn warning", lambda: Budget(max_turns_warning=0), "max_turns_warning"),
    ("budget not a Budget", lambda: _scripted(budget=10), "budget="),
    # retry policy
    ("unknown jitter name", lambda: RetryPolicy(jitter="fully"), "jitter"),
    ("jitter 'none' as text", lambda: RetryPolicy(jitter="none"), "jitter"),
    ("jitter fraction as text", lambda: RetryPolicy(jitter="0.5"), "jitter"),
    ("max_attempts None", lambda: RetryPolicy(max_attempts=None), "max_attempts"),
    ("max_attempts words", lambda: RetryPolicy(max_attempts="three"), "max_attempts"),
    ("infinite attempts", lambda: RetryPolicy(max_attempts=float("inf")), "max_attempts"),
    ("initial_delay None", lambda: RetryPolicy(initial_delay=None), "initial_delay"),
    ("max_delay text", lambda: RetryPolicy(max_delay="5"), "max_delay"),
    ("max_retry_after None", lambda: RetryPolicy(max_retry_after=None), "max_retry_after"),
    ("multiplier None", lambda: RetryPolicy(multiplier=None), "multiplier"),
    (
        "unknown retry_after_partial",
        lambda: RetryPolicy(retry_after_partial="sometimes"),
        "retry_after_partial",
    ),
    ("retry not a policy", lambda: _scripted(retry=5), "retry="),
    ("retry as a dict", lambda: _scripted(retry={"max_attempts": 3}), "retry="),
    # model strings, keys and URLs
    ("no model", lambda: Agent([]), "model="),
    ("model of the wrong type", lambda: Agent(123), "model="),  # type: ignore[arg-type]
    ("model without prefix", lambda: Agent("gpt-4o"), "openai:gpt-4o"),
    ("unknown provider", lambda: Agent("frobnicate:x"), "frobnicate"),
    ("provider without model", lambda: Agent("anthropic:"), "anthropic"),
    ("missing key", lambda: Agent("anthropic:claude-x"), "ANTHROPIC_API_KEY"),
    ("key of the wrong type", lambda: Agent("openai:gpt-x", api_key=5), "api_key"),
    ("key with a space inside", lambda: Agent("openai:gpt-x", api_key="sk-a b"), "key"),
    (
        "base URL without scheme",
        lambda: Agent("openai:gpt-x", api_key="k", base_url="localhost:8080"),
        "base_url",
    ),
    (
        "base URL with a bad port",
        lambda: Agent("openai:gpt-x", api_key="k", base_url="http://localhost:80a"),
        "base_url",
    ),
    ("base URL ftp", lambda: Agent("demo", base_url="ftp://example.com"), "base_url"),
    ("base URL empty", lambda: Agent("openai:gpt-x", api_key="k", base_url=""), "base_url"),
    ("base URL with spaces", lambda: Agent("demo", base_url="http://exa mple.com"), "base_url"),
    (
        "unknown provider option",
        lambda: resolve_model("openai:gpt-x", api_key="k", timeout=5),
        "timeout",
    ),
    (
        "zero idle timeout",
        lambda: OpenAIProvider("gpt-x", api_key="k", idle_timeout=0),
        "idle_timeout",
    ),
    (
        "negative body cap",
        lambda: AnthropicProvider("c", api_key="k", max_body_bytes=-1),
        "max_body_bytes",
    ),
    # agent arguments
    ("zero max_tokens", lambda: _scripted(max_tokens=0), "max_tokens"),
    ("max_tokens as text", lambda: _scripted(max_tokens="100"), "max_tokens"),
    ("max_tokens True", lambda: _scripted(max_tokens=True), "max_tokens"),
    ("negative context window", lambda: _scripted(context_window=-5), "context_window"),
    ("context window True", lambda: _scripted(context_window=True), "context_window"),
    ("threshold above 1", lambda: _scripted(compaction_threshold=1.5), "compaction_threshold"),
    ("threshold as text", lambda: _scripted(compaction_threshold="0.8"), "compaction_threshold"),
    ("resumes None", lambda: _scripted(max_length_resumes=None), "max_length_resumes"),
    (
        "compactions as text",
        lambda: _scripted(max_compactions_per_step="x"),
        "max_compactions_per_step",
    ),
    ("system prompt not text", lambda: _scripted(system=5), "system="),
    ("options not a dict", lambda: _scripted(options=[1]), "options="),
    ("clock by name", lambda: _scripted(clock="virtual"), "clock="),
    ("compaction by name", lambda: _scripted(compaction="stubs"), "compaction="),
    ("limiter by name", lambda: _scripted(limiter="yes"), "limiter="),
    ("one subscriber, not a list", lambda: _scripted(subscribers=print), "subscribers="),
    ("a subscriber that is None", lambda: _scripted(subscribers=[None]), "subscriber"),
    ("history of strings", lambda: _scripted(history=["hello"]), "history="),
    (
        "history of dicts",
        lambda: _scripted(history=[{"role": "user", "content": "hi"}]),
        "history=",
    ),
    ("one message as history", lambda: _scripted(history=Message.user("hi")), "history="),
    # tools
    ("one tool, not a list", lambda: _scripted(tools=calculator), "tools="),
    ("a tool that is a number", lambda: _scripted(tools=[42]), "tools="),
    ("two tools, one name", lambda: _scripted(tools=[calculator, calculator]), "calculator"),
    ("allowed_tools a string", lambda: _scripted(allowed_tools="calculator"), "allowed_tools"),
    ("tool timeout zero", lambda: _scripted(tool_timeout=0), "tool_timeout"),
    ("tool timeout text", lambda: _scripted(tool_timeout="5"), "tool_timeout"),
    ("@tool timeout negative", lambda: tool(timeout=-1, name="t")(lambda: 1), "timeout"),
    ("@tool timeout text", lambda: tool(timeout="5", name="t")(lambda: 1), "timeout"),
    ("tool with *args", lambda: _tool_from_source("def f(*a):\n    return 1"), "*args"),
    ("tool with **kwargs", lambda: _tool_from_source("def f(**k):\n    return 1"), "kwargs"),
    (
        "tool with positional-only",
        lambda: _tool_from_source("def f(a, /):\n    return a"),
        "positional-only",
    ),
    ("tool with a socket parameter", _sock_param, "socket"),
    ("a class as a tool", lambda: tool(int), "int"),
    ("a lambda as a tool", lambda: tool(lambda: 1), "name="),
    ("a tool name with a space", lambda: tool(name="my tool")(lambda: 1), "my tool"),
    ("a tool that is not callable", lambda: tool(5), "@tool"),
    # structured outputs
    ("output_mode without output", lambda: Agent("demo", output_mode="tool"), "output_mode='tool'"),
    ("a lambda as output", lambda: Agent("demo", output=lambda x: x), "not the function"),
]


@pytest.mark.parametrize(("case", "make", "names"), CASES, ids=[c[0] for c in CASES])
def test_a_wrong_argument_gets_one_clear_sentence(
    case: str, make: Callable[[], Any], names: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError) as info:
        make()
    text = str(info.value)
    assert names in text, f"{case}: the message does not name {names!r}: {text}"
    assert "\n" not in text and 20 <= len(text) <= 300, f"{case}: not one sentence: {text!r}"
    assert "Traceback" not in text and "object is not" not in text, text


def test_out_of_range_policy_numbers_are_normalised_not_rejected() -> None:
    """DESIGN: out-of-range values are normalised, never rejected, and never silently."""
    with pytest.warns(UserWarning) as said:
        p = RetryPolicy(
            max_attempts=-1, initial_delay=-2, max_delay=0, multiplier=0.5, jitter=7.0, seed=1
        )
    assert (p.max_attempts, p.initial_delay, p.max_delay, p.multiplier, p.jitter) == (
        1,
        0.0,
        30.0,
        2.0,
        1.0,
    )
    assert len(said) == 5  # one sentence per replaced argument
    assert all("\n" not in str(w.message) for w in said)
    with pytest.warns(UserWarning, match=r"jitter=-0\.5 is out of range; using jitter=None"):
        assert RetryPolicy(jitter=-0.5).jitter is None


def test_a_prompt_of_the_wrong_type_is_a_config_error() -> None:
    agent = _scripted()
    for bad in (None, 123, ["a", "b"], Message.assistant("not a user turn")):
        with pytest.raises(ConfigError, match="prompt"):
            asyncio.run(agent.run(bad, show=False))  # type: ignore[arg-type]
    assert agent.history == []
    assert asyncio.run(agent.run("fine", show=False)).final_text == "ok"


def test_generators_are_fine_where_lists_are_expected() -> None:
    seen: list[Any] = []
    agent = Agent(
        ScriptedModel(["ok"]),
        clock=VirtualClock(),
        subscribers=(s for s in [seen.append]),
        history=(m for m in [Message.user("a"), Message.assistant("b")]),
        tools=(t for t in [calculator]),
    )
    asyncio.run(agent.run("c", show=False))
    assert seen and [m.text for m in agent.history] == ["a", "b", "c", "ok"]


def test_mock_fault_mistakes_get_one_sentence() -> None:
    from nbagent.mock import serve

    for bad in (["bogus"], ["429:retry_after=soon"], ["stall"], "500"):
        with pytest.raises(ValueError) as info, serve(bad):  # type: ignore[arg-type]
            pass
        assert "\n" not in str(info.value) and "ault" in str(info.value)
    with pytest.raises(ValueError, match="at most 1"), serve(fault_rates={"500": 0.7, "429": 0.6}):
        pass
    with pytest.raises(ValueError, match="known faults"):
        fault("999")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["demo", "--fault-rate", "2"], "--fault-rate"),
        (["demo", "--faults", "bogus"], "bogus"),
        (["demo", "--model", "gpt-4o"], "openai:gpt-4o"),
        (["frobnicate"], "unknown command"),
    ],
)
def test_cli_mistakes_exit_2_with_one_message(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from nbagent._cli import main

    if argv[0] == "demo":
        argv = [*argv, "--out", str(tmp_path / "o")]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert says in err and "Traceback" not in err, err
