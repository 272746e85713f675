"""Persistence: a session saved after chaos, cancellation or any content loads back equal, and a
save interrupted half-way (an exception, an interrupt, a killed process) leaves the previous file
intact."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import TABLE_ERRORS, check_conversation
from test_chaos import Chaos, chaos_tools

from nbagent import (
    Agent,
    Budget,
    Message,
    Reply,
    RetryPolicy,
    ScriptedModel,
    ToolUse,
    VirtualClock,
)
from nbagent import errors as E
from nbagent._core import _messages as M
from nbagent._core._messages import (
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    load_session,
    save_session,
)


def reload(agent: Agent, path: Path) -> Agent:
    agent.save(path)
    other = Agent(ScriptedModel([]), clock=VirtualClock())
    other.load(path)
    return other


def test_sessions_saved_after_a_chaos_soak_load_back_equal(tmp_path: Path) -> None:
    rng = random.Random(5)
    chaos = Chaos(random.Random(6))
    saved = 0

    async def main() -> None:
        nonlocal saved
        for s in range(40):
            clock = VirtualClock()
            agent = Agent(
                ScriptedModel([chaos] * 1000),
                tools=chaos_tools(clock),
                clock=clock,
                retry=RetryPolicy(max_attempts=rng.randint(1, 5), seed=s),
                budget=Budget(max_turns=6),
                context_window=rng.choice([None, 6000]),
                tool_timeout=0.01,
            )
            for i in range(rng.randint(1, 4)):
                with contextlib.suppress(TABLE_ERRORS):
                    await agent.run(f"task {i}", show=False)
                path = tmp_path / f"s{s}-{i}.json"
                other = reload(agent, path)
                assert other.history == agent.history
                assert other.transcript == agent.transcript
                check_conversation(other.history)
                saved += 1

    asyncio.run(main())
    assert saved >= 40


def test_a_session_saved_after_a_cancel_loads_back_equal(tmp_path: Path) -> None:
    async def main() -> None:
        clock = VirtualClock(auto_advance=False)
        agent = Agent(
            ScriptedModel([Reply("looking", [ToolUse("slow", {})]), "done"]),
            tools=[_slow_tool(clock)],
            clock=clock,
            history=[Message.user("before"), Message.assistant("kept")],
        )
        handle = agent.start("go", show=False)
        while clock.sleepers == 0:
            await asyncio.sleep(0)
        handle.cancel()
        with pytest.raises(E.Aborted):
            await handle
        other = reload(agent, tmp_path / "c.json")
        assert (
            other.history
            == agent.history
            == [
                Message.user("before"),
                Message.assistant("kept"),
            ]
        )

    asyncio.run(main())


def _slow_tool(clock: VirtualClock) -> Any:
    from nbagent import tool

    async def slow() -> str:
        """Takes a while."""
        await clock.sleep(10)
        return "slow result"

    return tool(slow)


# -- any content round-trips ---------------------------------------------------------------------

any_text = st.text(alphabet=st.characters(codec=None), max_size=30)  # surrogates included


def _nest(inner: Any) -> Any:
    return st.one_of(st.lists(inner, max_size=3), st.dictionaries(any_text, inner, max_size=3))


json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), any_text),
    _nest,
    max_leaves=8,
)
part_st = st.one_of(
    st.builds(TextBlock, any_text), st.builds(ImageBlock, any_text, st.sampled_from(["image/png"]))
)


@st.composite
def conversations(draw: Any) -> list[Message]:
    out: list[Message] = []
    for i in range(draw(st.integers(0, 4))):
        user_blocks: list[Any] = [TextBlock(draw(any_text))]
        out.append(Message("user", tuple(user_blocks)))
        blocks: list[Any] = []
        if draw(st.booleans()):
            blocks.append(ThinkingBlock(draw(any_text), draw(any_text)))
        blocks.append(TextBlock(draw(any_text)))
        uses = [
            ToolUseBlock(
                f"t{i}_{j}",
                draw(any_text),
                draw(st.dictionaries(any_text, json_value, max_size=3)),
                draw(st.one_of(st.none(), any_text)),
            )
            for j in range(draw(st.integers(0, 2)))
        ]
        out.append(Message("assistant", tuple(blocks + uses)))
        if uses:
            results = tuple(
                ToolResultBlock(
                    u.id, tuple(draw(st.lists(part_st, max_size=2))), draw(st.booleans())
                )
                for u in uses
            )
            out.append(Message("user", results))
    return out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=conversations(), meta=st.dictionaries(any_text, json_value, max_size=3))
def test_any_conversation_round_trips_exactly(history: list[Message], meta: dict[str, Any]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.json"
        save_session(path, history, meta)
        loaded, meta_back = load_session(path)
        assert loaded == history
        assert meta_back == meta
        assert os.listdir(d) == ["s.json"]  # no temporary file left behind


# -- interrupted saves ---------------------------------------------------------------------------


def _agent_with(text: str) -> Agent:
    return Agent(
        ScriptedModel([]),
        clock=VirtualClock(),
        history=[Message.user("q"), Message.assistant(text)],
    )


@pytest.mark.parametrize(
    ("where", "exc"),
    [
        ("write", OSError(28, "No space left on device")),
        ("fsync", OSError(5, "Input/output error")),
        ("replace", PermissionError(13, "Permission denied")),
        ("write", KeyboardInterrupt()),
        ("fsync", KeyboardInterrupt()),
    ],
)
def test_an_interrupted_save_leaves_the_previous_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, exc: BaseException
) -> None:
    path = tmp_path / "session.json"
    _agent_with("the first version").save(path)
    before = path.read_bytes()

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise exc

    if where == "write":
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, fh: Any) -> None:
                self.fh = fh

            def __enter__(self) -> HalfWriter:
                return self

            def __exit__(self, *a: Any) -> None:
                self.fh.close()

            def write(self, data: bytes) -> int:
                self.fh.write(data[: len(data) // 2])  # half of it lands, then the failure
                raise exc

            def __getattr__(self, name: str) -> Any:
                return getattr(self.fh, name)

        monkeypatch.setattr(M.os, "fdopen", lambda fd, mode: HalfWriter(real_fdopen(fd, mode)))
    elif where == "fsync":
        monkeypatch.setattr(M.os, "fsync", boom)
    else:
        monkeypatch.setattr(M.os, "replace", boom)

    with pytest.raises((type(exc), E.HostError)):
        _agent_with("the second version " + "x" * 10_000).save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.json"]  # no temp file left
    assert reload(_agent_with("unused"), tmp_path / "x.json") is not None
    loaded = Agent(ScriptedModel([]), clock=VirtualClock())
    loaded.load(path)
    assert loaded.history[-1].text == "the first version"


@pytest.mark.e2e
@pytest.mark.slow
def test_a_process_killed_while_saving_leaves_a_loadable_file(tmp_path: Path) -> None:
    """SIGKILL a process in a loop of saves, many times: the file is always one whole version."""
    path = tmp_path / "session.json"
    script = textwrap.dedent(
        f"""
        import sys
        from nbagent._core._messages import Message, save_session
        big = "y" * 200_000
        i = 0
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        while True:
            i += 1
            msgs = [Message.user(f"version {{i}}"), Message.assistant(big + str(i))]
            save_session({str(path)!r}, msgs, {{"version": i}})
        """
    )
    rng = random.Random(3)
    versions: set[int] = set()
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        # one whole save first (however slow the machine), so there is a version to find;
        # then the kill lands at a random point of a later save
        deadline = time.monotonic() + 60
        while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05 + rng.random() * 0.15)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if not path.exists():
            continue
        messages, meta = load_session(path)
        v = meta["version"]
        assert messages[0].text == f"version {v}"
        assert messages[1].text.endswith(str(v)) and len(messages[1].text) > 200_000
        versions.add(v)
    assert versions, "no save ever completed"
    # leftovers of killed saves are hidden temporary files, never the session itself
    for p in tmp_path.iterdir():
        assert p.name == "session.json" or (
            p.name.startswith(".session.json.") and p.suffix == ".tmp"
        )


def test_saving_into_a_missing_folder_says_so_in_one_sentence(tmp_path: Path) -> None:
    agent = _agent_with("hello")
    target = tmp_path / "no" / "such" / "folder" / "s.json"
    with pytest.raises(E.NbAgentError) as info:
        agent.save(target)
    text = str(info.value)
    assert str(target) in text and ".tmp" not in text, text


def test_a_session_file_with_a_broken_transcript_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    _agent_with("hello").save(path)
    doc = json.loads(path.read_text())
    doc["meta"]["transcript"] = [{"role": "robot"}]
    path.write_text(json.dumps(doc))
    agent = Agent(ScriptedModel([]), clock=VirtualClock())
    agent.load(path)
    assert agent.history[-1].text == "hello"
    assert agent.transcript == agent.history
