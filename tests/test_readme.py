"""Every ```python block of README.md runs as written, offline, against the demo model.

The blocks are run in order, as cells of one IPython session, exactly as a reader pastes them
into a notebook: top-level `await` and `%`/`%%` magics work there as they do in Jupyter, and a
later block may use what an earlier one defined. Nothing is skipped: the test counts the blocks
it ran against the blocks in the file. Real-provider blocks only construct agents, which sends
nothing, so placeholder keys are set for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from ray_support import ray_session
from traitlets.config import Config

from nbagent import Agent

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def python_blocks() -> list[str]:
    return FENCE.findall(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[object]:
    """The README's Ray block finds a local Ray already running (as after the user's own
    `ray.init()`), started the way the Ray tests start it (see `ray_support`)."""
    yield from ray_session()


@pytest.fixture
def shell(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ray_cluster: object
) -> Iterator[InteractiveShell]:
    for var in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "AZURE_OPENAI_API_KEY",
    ):
        monkeypatch.setenv(var, "sk-placeholder-the-readme-test-sends-nothing")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://placeholder.openai.azure.com")
    monkeypatch.chdir(tmp_path)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell(config=config)
    shell.user_ns["_readme_agents"] = []
    try:
        yield shell
    finally:
        magics = shell.magics_manager.registry.get("AgentMagics")
        if magics is not None:
            magics.reset()  # type: ignore[attr-defined]
            magics.close()  # type: ignore[attr-defined]
        # close every agent's connections in the loop that opened them (IPython's own)
        shell.run_cell("for _a in _readme_agents: await _a.aclose()", store_history=False)
        shell.cleanup()


def test_every_python_block_of_the_readme_runs(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = python_blocks()
    assert len(blocks) >= 6, "the README lost its examples"
    ns = shell.user_ns
    seen: dict[int, dict[str, object]] = {}
    for index, block in enumerate(blocks, 1):
        result = shell.run_cell(block, store_history=False)
        failure = result.error_before_exec or result.error_in_exec
        assert result.success, f"README python block {index} fails:\n{block}\n{failure!r}"
        seen[index] = dict(ns)
        agents = [v for v in ns.values() if isinstance(v, Agent)]
        ns["_readme_agents"].extend(a for a in agents if a not in ns["_readme_agents"])
    assert len(seen) == len(blocks)  # every block ran, none was left out
    printed = capsys.readouterr().out

    # the first snippet's own calculator tool did the arithmetic (it used to answer nothing)
    first = seen[1]
    assert "395" in first["result"].final_text, first["result"].final_text  # type: ignore[attr-defined]
    tools = first["agent"].attempts.query("phase == 'tool'")  # type: ignore[attr-defined]
    assert list(tools["tool_name"]) == ["calculator"] and list(tools["outcome"]) == ["ok"]
    assert "17 * 23 + 4 = 395." in printed
    # the %%agent block ran its prompt through the fault script and printed the answer
    magic_agent = ns["_agent"]
    assert {429, 500} <= set(magic_agent.attempts["status_code"].dropna().astype(int))
    # the batch block answered both prompts
    assert list(ns["out"].results["end_reason"]) == ["end_turn", "end_turn"]
