"""`%load_ext nbagent` and `%%agent`, driven in-process through IPython's `InteractiveShell`.

No kernel here: without one a cell runs to completion (`run_sync`) and prints the answer. The
background path a notebook takes (timeline under the cell, a `RunHandle`, Stop) is exercised by
pretending to be in a notebook inside a running event loop, the way ipykernel runs cells.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

import nbagent
from nbagent import Aborted, Agent, ServerError
from nbagent import _magic as magic
from nbagent._magic import AgentMagics, split_faults


@pytest.fixture(scope="module")
def shell() -> InteractiveShell:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    return InteractiveShell.instance(config=config)


@pytest.fixture
def magics(shell: InteractiveShell) -> Iterator[AgentMagics]:
    """A fresh `%load_ext nbagent` for each test; its mock server is stopped afterwards."""
    nbagent.load_ipython_extension(shell)
    registered = shell.magics_manager.registry["AgentMagics"]
    assert isinstance(registered, AgentMagics)
    yield registered
    registered.reset()
    registered.close()
    assert registered.server is None


def cell(shell: InteractiveShell, line: str, body: str) -> Any:
    return shell.run_cell_magic("agent", line, body)


def statuses(agent: Agent) -> list[int]:
    """The HTTP statuses of the failed attempts (every answer has its 200 as well)."""
    df = agent.attempts
    return [int(s) for s in df.loc[df["outcome"] == "error", "status_code"].dropna()]


def prompts_sent(magics: AgentMagics) -> list[list[str]]:
    """The user texts of each request body the mock server received."""
    assert magics.server is not None
    sent = []
    for record in magics.server.requests:
        users = [m for m in record.body["messages"] if m["role"] == "user"]
        texts = [c if isinstance(c, str) else c[0].get("text", "") for c in map(content, users)]
        sent.append(texts)
    return sent


def content(message: dict[str, Any]) -> Any:
    return message["content"]


# -- registration and the plain path -------------------------------------------------------------


@pytest.mark.e2e
def test_load_ext_registers_the_magics(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "agent" in shell.magics_manager.magics["cell"]
    assert "agent_reset" in shell.magics_manager.magics["line"]
    cell(shell, "--no-widget", "What is 2+2?")
    server = magics.server
    assert server is not None and server.running
    shell.run_line_magic("reload_ext", "nbagent")
    fresh = shell.magics_manager.registry["AgentMagics"]
    assert isinstance(fresh, AgentMagics) and fresh is not magics
    assert not server.running and magics.agents == {}  # the old magics were wound up
    fresh.close()
    capsys.readouterr()


@pytest.mark.e2e
def test_cell_body_is_the_prompt_and_the_answer_is_printed(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cell(shell, "--no-widget", "What is 2+2?\n") is None
    assert "2+2 = 4." in capsys.readouterr().out
    agent = shell.user_ns["_agent"]
    assert isinstance(agent, Agent) and agent.models == ["demo"]
    assert shell.user_ns["_agent_result"].final_text.startswith("2+2 = 4.")
    assert magics.server is not None and magics.server.running
    assert prompts_sent(magics)[0] == ["What is 2+2?"]


@pytest.mark.e2e
def test_conversation_continues_across_cells_and_new_starts_over(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, "--no-widget --tools none", "What is 2+2?")
    first = shell.user_ns["_agent"]
    cell(shell, "--no-widget", "And what is 3*7?")
    assert shell.user_ns["_agent"] is first
    assert [m.role for m in first.history] == ["user", "assistant", "user", "assistant"]
    assert prompts_sent(magics)[-1] == ["What is 2+2?", "And what is 3*7?"]
    out = capsys.readouterr().out
    assert "2+2 = 4." in out and "3*7 = 21." in out

    cell(shell, "--no-widget --new --tools none", "What is 5+5?")
    second = shell.user_ns["_agent"]
    assert second is not first and len(second.history) == 2
    assert prompts_sent(magics)[-1] == ["What is 5+5?"]
    assert len(first.history) == 4  # the old conversation is left as it was


@pytest.mark.e2e
def test_faults_cause_retries_visible_in_the_attempt_log(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, '--no-widget --faults "429:retry_after=0.1,500" --seed 1', "What is 17*23?")
    agent = shell.user_ns["_agent"]
    assert "17*23 = 391." in capsys.readouterr().out
    frame = agent.attempts
    assert statuses(agent) == [429, 500]
    failed = frame[frame["outcome"] == "error"]
    assert list(failed["action"]) == ["retry", "retry"]
    assert failed["retry_after_s"].iloc[0] == pytest.approx(0.1)
    assert list(frame[frame["phase"] == "request"]["outcome"]) == ["error", "error", "ok", "ok"]

    # The script is per cell: the next cell without --faults gets clean answers.
    cell(shell, "--no-widget", "And what is 2+2?")
    assert statuses(agent) == [429, 500]
    assert magics.server is not None
    faults = [r.fault for r in magics.server.requests]
    assert faults[:3] == ["429:retry_after=0.1", "500", "ok"]
    assert set(faults[3:]) == {"ok"}


@pytest.mark.e2e
def test_policy_options_and_the_system_prompt(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, '--no-widget --tools none --system "Answer briefly."', "What is 2+2?")
    agent = shell.user_ns["_agent"]
    assert agent.system == "Answer briefly."
    assert magics.server is not None
    assert "Answer briefly." in str(magics.server.requests[-1].body.get("system"))
    history = list(agent.history)

    with pytest.raises(ServerError):
        cell(shell, '--no-widget --faults "500,500" --max-attempts 2', "What is 3+3?")
    assert agent.retry.max_attempts == 2
    assert agent.history == history  # a hard failure leaves the conversation as it was
    assert statuses(agent)[-2:] == [500, 500]
    assert list(agent.attempts["action"])[-1] == "fail"
    capsys.readouterr()


@pytest.mark.parametrize(
    ("line", "body", "message"),
    [
        ("--seed x", "hi", "argument --seed: invalid int value: 'x'"),
        ("--bogus", "hi", "unrecognized arguments: --bogus"),
        ("--tools some", "hi", "argument --tools: invalid choice: 'some'"),
        ("--max-attempts 0", "hi", "--max-attempts must be 1 or more"),
        ("--system 'unclosed", "hi", "cannot read the options (No closing quotation)"),
        ('--faults "500,bogus"', "hi", "--faults: Fault 'bogus' has unknown kind 'bogus'"),
        ("--faults 429:wait=2", "hi", "unknown parameter 'wait' for kind '429'"),
        ("--model openai:gpt-4o --faults 500", "hi", "works with --model demo only"),
        ("--model nosuch", "hi", "model string 'nosuch' has no provider prefix"),
        ("--no-widget --wait", "hi", "--no-widget already waits"),
        ("--no-widget", "  \n", "the cell body is the prompt, and it is empty"),
    ],
)
def test_mistakes_are_usage_errors_that_say_what_is_wrong(
    shell: InteractiveShell, magics: AgentMagics, line: str, body: str, message: str
) -> None:
    with pytest.raises(UsageError, match="^%%agent: ") as info:
        cell(shell, line, body)
    assert message in str(info.value)
    assert magics.agents == {} or "nosuch" not in magics.agents


@pytest.mark.e2e
def test_tools_are_fixed_for_a_conversation(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, "--no-widget", "What is 2+2?")
    with pytest.raises(UsageError, match="add --new to start a new one with --tools none"):
        cell(shell, "--no-widget --tools none", "What is 2+2?")
    assert set(shell.user_ns["_agent"].toolbox.names) >= {"calculator"}
    cell(shell, "--no-widget --tools none --new", "What is 2+2?")
    assert list(shell.user_ns["_agent"].toolbox.names) == []
    capsys.readouterr()


def test_help_prints_the_options(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cell(shell, "--help", "ignored") is None
    out = capsys.readouterr().out
    for option in ("--model", "--faults", "--seed", "--max-attempts", "--system", "--new"):
        assert option in out
    assert magics.agents == {}


def test_help_alone_in_a_cell_prints_the_options(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    # IPython refuses a cell magic with an empty body before calling it; --help is let through
    for source in ("%%agent --help", "%%agent -h\n\n", "%%agent --model demo --help  "):
        result = shell.run_cell(source)
        assert result.success, result.error_in_exec
        out = capsys.readouterr().out
        assert "usage: %%agent" in out and "--faults" in out, source
    assert magics.agents == {}
    # an empty body without --help is still IPython's usage error, and runs nothing
    result = shell.run_cell("%%agent --new")
    assert not result.success
    assert "cell body is empty" in str(result.error_in_exec)
    capsys.readouterr()
    # reloading the extension does not stack a second copy of the help transformer
    nbagent.load_ipython_extension(shell)
    names = [getattr(t, "__name__", "") for t in shell.input_transformers_cleanup]
    assert names.count("help_alone") == 1


@pytest.mark.e2e
def test_agent_reset_forgets_and_stops_the_server(
    shell: InteractiveShell, magics: AgentMagics, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, "--no-widget", "What is 2+2?")
    server = magics.server
    assert server is not None and server.running
    shell.run_line_magic("agent_reset", "")
    assert not server.running and magics.server is None and magics.agents == {}
    assert "_agent" not in shell.user_ns
    cell(shell, "--no-widget", "What is 2+2?")  # starts afresh
    assert len(shell.user_ns["_agent"].history) >= 2
    capsys.readouterr()


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("429:retry_after=1,500", ["429:retry_after=1", "500"]),
        (
            "429:retry_after=1,should_retry=false,500",
            ["429:retry_after=1,should_retry=false", "500"],
        ),
        ("500 503; ok", ["500", "503", "ok"]),
        (
            "drop_after_tokens=5, stall=0.5:should_retry=true",
            ["drop_after_tokens=5", "stall=0.5:should_retry=true"],
        ),
        ("  ", []),
    ],
)
def test_split_faults(text: str, entries: list[str]) -> None:
    assert split_faults(text) == entries


# -- the notebook path: a background run with the timeline and its Stop button -------------------


@pytest.fixture
def notebook(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Pretend to run under a kernel with a frontend (display() prints in a plain shell)."""
    monkeypatch.setattr(magic, "in_notebook", lambda: True)


@pytest.mark.e2e
def test_in_a_notebook_the_run_goes_to_the_background(
    shell: InteractiveShell, magics: AgentMagics, notebook: None
) -> None:
    async def main() -> None:
        cell(shell, "--faults 500 --seed 2", "What is 12*12?")
        handle = shell.user_ns["_agent_handle"]
        assert not handle.done()  # the cell returned at once
        assert magics.view is not None
        # A second cell queues behind the first on the same conversation.
        cell(shell, "", "And what is 2+2?")
        second = shell.user_ns["_agent_handle"]
        assert second is not handle
        first_result = await handle
        assert first_result.final_text.startswith("12*12 = 144.")
        second_result = await second
        assert second_result.final_text.startswith("2+2 = 4.")
        assert shell.user_ns["_agent_result"] is second_result
        await shell.user_ns["_agent"].aclose()  # the connections of this loop

    asyncio.run(main())
    agent = shell.user_ns["_agent"]
    assert statuses(agent) == [500]
    assert agent.history[0].role == "user" and agent.history[-1].role == "assistant"
    assert prompts_sent(magics)[-1][0] == "What is 12*12?"
    assert magics.view is not None
    assert magics.view.timeline.state["status"] == "done: end_turn"
    assert magics.view.stop_button.description == "Finished"


@pytest.mark.e2e
def test_the_stop_button_cancels_the_background_run(
    shell: InteractiveShell, magics: AgentMagics, notebook: None
) -> None:
    async def main() -> None:
        cell(shell, "--tools none", "What is 2+2?")
        await shell.user_ns["_agent_handle"]
        before = list(shell.user_ns["_agent"].history)
        cell(shell, '--faults "429:retry_after=30"', "And what is 3*3?")
        handle = shell.user_ns["_agent_handle"]
        view = magics.view
        assert view is not None
        for _ in range(200):  # until the server's 429 has been seen and the wait begun
            await asyncio.sleep(0.01)
            if "asked to wait" in view.timeline.state["status"]:
                break
        assert "asked to wait 30" in view.timeline.state["status"]
        view.stop_button.click()
        with pytest.raises(Aborted):
            await handle
        assert handle.done()
        assert shell.user_ns["_agent"].history == before
        assert view.timeline.state["status"].startswith("cancelled")
        assert "_agent_result" in shell.user_ns  # still the first cell's result
        assert shell.user_ns["_agent_result"].final_text.startswith("2+2")
        await shell.user_ns["_agent"].aclose()

    asyncio.run(asyncio.wait_for(main(), 10))


@pytest.mark.e2e
def test_wait_runs_in_the_foreground_even_in_a_notebook(
    shell: InteractiveShell,
    magics: AgentMagics,
    notebook: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def main() -> None:
        cell(shell, "--wait --tools none", "What is 6*7?")
        assert "_agent_handle" not in shell.user_ns

    shell.user_ns.pop("_agent_handle", None)
    asyncio.run(main())
    assert "6*7 = 42." in capsys.readouterr().out


@pytest.mark.e2e
def test_a_foreground_cell_refuses_while_a_background_run_is_going(
    shell: InteractiveShell, magics: AgentMagics, notebook: None
) -> None:
    async def main() -> None:
        cell(shell, '--faults "429:retry_after=30"', "What is 2+2?")
        handle = shell.user_ns["_agent_handle"]
        with pytest.raises(UsageError, match="still going in the background"):
            cell(shell, "--no-widget", "And 3+3?")
        handle.cancel()
        with pytest.raises(Aborted):
            await handle
        await shell.user_ns["_agent"].aclose()

    asyncio.run(asyncio.wait_for(main(), 10))
