"""The code a reader copies runs as written: every ```python block of the README and of the docs'
pages, offline, against the demo model; and none of it imports a private module.

The blocks of one page are run in order, as cells of one IPython session, exactly as a reader
pastes them into a notebook: top-level `await` and `%`/`%%` magics work there as they do in
Jupyter, and a later block may use what an earlier one defined. Each page gets a session of its
own. Nothing is skipped silently: a block that cannot run offline is marked on the line before
it with `<!-- not run: the reason -->`, and the test counts the blocks it ran and the marked
ones against the blocks in the file. Real-provider blocks only construct agents, which sends
nothing, so placeholder keys are set for them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from nbagent import Agent

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(
    r"^(?:<!-- not run: (?P<why>[^\n]*?) -->\n)?```python\n(?P<code>.*?)^```$", re.M | re.S
)
PAGES = [README, ROOT / "docs" / "index.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = list(dict.fromkeys(p for p in PAGES if "reference" not in p.relative_to(ROOT).parts))


@dataclass(frozen=True)
class Block:
    code: str
    not_run: str | None  # the reason given, for a block marked `<!-- not run: ... -->`


def python_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(m["code"], m["why"]) for m in FENCE.finditer(text)]


def fenced_python(page: Path) -> int:
    return len(re.findall(r"^```python$", page.read_text(encoding="utf-8"), re.M))


PAGES_WITH_CODE = [p for p in PAGES if python_blocks(p)]


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[object]:
    """A Ray block finds a local Ray already running (as after the user's own `ray.init()`),
    started the way the Ray tests start it (see `ray_support`); only pages with one start it."""
    from ray_support import ray_session

    yield from ray_session()


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[InteractiveShell]:
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


Namespace = dict[str, object]


def readme_checks(seen: list[Namespace], printed: str) -> None:
    # the first snippet's own calculator tool did the arithmetic (it used to answer nothing)
    first = seen[0]
    assert "395" in first["result"].final_text, first["result"].final_text  # type: ignore[attr-defined]
    tools = first["agent"].attempts.query("phase == 'tool'")  # type: ignore[attr-defined]
    assert list(tools["tool_name"]) == ["calculator"] and list(tools["outcome"]) == ["ok"]
    assert "17 * 23 + 4 = 395." in printed


def front_door_checks(seen: list[Namespace], printed: str) -> None:
    readme_checks(seen, printed)
    # structured outputs over a batch: a typed column per field, every row validated
    results = seen[1]["out"].results  # type: ignore[attr-defined]
    assert results["error"].isna().all()
    assert {"sentiment", "stars", "reasks"} <= set(results.columns)
    assert all(isinstance(v, seen[1]["Review"]) for v in results["output"])
    # the output the README shows under the block is what the block prints
    table = results[["sentiment", "stars", "reasks", "error"]].to_string()
    assert table in printed
    shown = re.search(
        r"one typed column per field\n```\n\n```text\n(.*?)```",
        (ROOT / "README.md").read_text(encoding="utf-8"),
        re.S,
    )
    assert shown is not None and shown.group(1).rstrip("\n") == table
    assert set(results["stars"]) <= {1, 2, 3, 4, 5}  # the schema's Field(ge=1, le=5)


def notebook_checks(seen: list[Namespace], printed: str) -> None:
    # the %%agent block ran its prompt through the fault script and printed the answer
    magic_agent = seen[-1]["_agent"]
    assert {429, 500} <= set(magic_agent.attempts["status_code"].dropna().astype(int))  # type: ignore[attr-defined]


def batch_checks(seen: list[Namespace], printed: str) -> None:
    # the batch block answered both prompts, and so did the Ray one
    for ns in seen:
        assert list(ns["out"].results["end_reason"]) == ["end_turn", "end_turn"]  # type: ignore[attr-defined]


def watch_checks(seen: list[Namespace], printed: str) -> None:
    # the SDK retried the 529 and the 429 on its own, and the watcher saw all three attempts
    ns = seen[0]
    assert ns["reply"].content[0].text in printed  # type: ignore[attr-defined]
    frame = ns["w"].attempts  # type: ignore[attr-defined]
    assert list(frame["status_code"].fillna(200).astype(int)) == [529, 429, 200]
    assert frame["retry_after_s"].iloc[1] == pytest.approx(1.0)
    # an outer layer's three tries over the SDK's own two retries: one call, nine requests
    amp = seen[1]["w"].amplification  # type: ignore[attr-defined]
    assert (amp["logical_calls"].iloc[0], amp["requests"].iloc[0]) == (3, 9)
    # guarded: the SDK's retries off, nbagent's decision on every answer
    guarded = seen[2]["nbagent"].watching(seen[2]["client"]).attempts  # type: ignore[attr-defined]
    assert list(guarded["action"]) == ["retry", "retry", "none"]
    assert list(guarded["status_code"]) == [529, 429, 200]


def recording_checks(seen: list[Namespace], printed: str) -> None:
    ns = seen[0]
    assert ns["replayed"].attempts["outcome"].eq("ok").all()  # type: ignore[attr-defined]
    assert {"recorded", "what if"} <= set(ns["result"].comparison.index)  # type: ignore[attr-defined]


# What a page's blocks must have done, beyond running (by page, relative to the root).
CHECKS: dict[str, Callable[[list[Namespace], str], None]] = {
    "README.md": front_door_checks,
    "docs/index.md": readme_checks,
    "docs/guide/notebook.md": notebook_checks,
    "docs/guide/batch.md": batch_checks,
    "docs/guide/watch.md": watch_checks,
    "docs/guide/recording.md": recording_checks,
}


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=page_id)
def test_every_python_block_of_the_page_runs(
    page: Path,
    shell: InteractiveShell,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    blocks = python_blocks(page)
    assert len(blocks) == fenced_python(page), "a python block the test cannot read"
    if any('backend="ray"' in b.code for b in blocks):
        request.getfixturevalue("ray_cluster")
    ns = shell.user_ns
    seen: list[Namespace] = []
    for index, block in enumerate(blocks, 1):
        if block.not_run is not None:
            assert block.not_run.strip(), f"{page_id(page)} block {index}: say why it is not run"
            continue
        result = shell.run_cell(block.code, store_history=False)
        failure = result.error_before_exec or result.error_in_exec
        assert result.success, (
            f"{page_id(page)} python block {index} fails:\n{block.code}\n{failure!r}"
        )
        seen.append(dict(ns))
        agents = [v for v in ns.values() if isinstance(v, Agent)]
        ns["_readme_agents"].extend(a for a in agents if a not in ns["_readme_agents"])  # type: ignore[attr-defined]
    ran = sum(b.not_run is None for b in blocks)
    assert len(seen) == ran  # every block not marked ran, none was left out
    check = CHECKS.get(page_id(page))
    if check is not None:
        check(seen, capsys.readouterr().out)


def test_the_pages_that_show_code_are_all_run() -> None:
    # the README is a front door: one example; the rest moved to the guide pages, and runs there
    assert len(python_blocks(README)) >= 1
    ran = {page_id(p) for p in PAGES_WITH_CODE}
    for moved in ("docs/guide/watch.md", "docs/guide/tracing.md", "docs/guide/recording.md"):
        assert moved in ran
    assert set(CHECKS) <= ran, "a page with checks lost its code"
    for page in PAGES_WITH_CODE:
        marked = [b for b in python_blocks(page) if b.not_run is not None]
        assert len(marked) < len(python_blocks(page)), f"{page_id(page)}: nothing of it runs"


# ---- no private module in what a reader copies -----------------------------------------------

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IMPORT = re.compile(r"^\s*(?:from\s+(nbagent[\w.]*)\s+import|import\s+(nbagent[\w.]*))", re.M)


def private_imports(code: str) -> list[str]:
    """The `nbagent` modules `code` imports whose dotted path has a `_`-prefixed part."""
    found = [a or b for a, b in IMPORT.findall(code)]
    try:  # a parseable cell: imports inside functions and `import a, b` too
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.append(node.module)
            elif isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
    except SyntaxError:  # magics, top-level await: the pattern above has read them
        pass
    return sorted(
        {
            name
            for name in found
            if name.split(".")[0] == "nbagent" and any(p.startswith("_") for p in name.split("."))
        }
    )


def test_private_imports_are_recognised() -> None:
    assert private_imports("from nbagent.demo._replay import shipped_recordings") == [
        "nbagent.demo._replay"
    ]
    assert private_imports("import os, nbagent._palette\nawait x") == ["nbagent._palette"]
    assert private_imports("def f():\n    from nbagent._core import _retry\n") == ["nbagent._core"]
    assert private_imports("from nbagent.demo import shipped_recordings\nimport nbagent") == []


def test_no_notebook_readme_block_or_docs_page_imports_a_private_module() -> None:
    offenders = []
    for page in PAGES:
        for name in private_imports(page.read_text(encoding="utf-8")):
            offenders.append(f"{page_id(page)} imports {name}")
    for path in NOTEBOOKS:
        for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"], 1):
            for name in private_imports("".join(cell["source"])):
                offenders.append(f"{page_id(path)} cell {index} imports {name}")
    assert not offenders, "use the public module instead:\n" + "\n".join(offenders)


def test_the_watch_guides_guard_example_runs_on_its_own() -> None:
    # a reader who jumps to "One layer retries" copies that block alone: it must not lean on
    # `ask` (or anything else) from the example before it
    page = ROOT / "docs" / "guide" / "watch.md"
    (block,) = [b for b in python_blocks(page) if "nbagent.guard(" in b.code]
    scope: dict[str, object] = {}
    exec(compile(block.code, "watch.md: the guard example", "exec"), scope)
    attempts = scope["nbagent"].watching(scope["client"]).attempts  # type: ignore[attr-defined]
    assert list(attempts["action"]) == ["retry", "retry", "none"]
