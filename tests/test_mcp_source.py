"""MCP servers as tool sources: real servers over stdio (and streamable HTTP), every failure a
tool result. The servers are tests/mcp_servers/flaky_server.py and the demo notes server."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent._core._messages import ImageBlock, TextBlock
from nbagent._loop._agent import Agent
from nbagent._loop._tools import ToolCall, ToolOutcome, ToolSource
from nbagent._mcp._convert import to_outcome
from nbagent._mcp._source import MCPSource
from nbagent.demo._servers import notes_server_command, notes_source
from nbagent.errors import ConfigError
from nbagent.providers._scripted import Reply, ScriptedModel, ToolUse

pytestmark = pytest.mark.e2e

FLAKY = Path(__file__).parent / "mcp_servers" / "flaky_server.py"
FLAKY_CMD = [sys.executable, str(FLAKY)]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def outcomes(got: Any) -> list[ToolOutcome]:
    assert all(isinstance(o, ToolOutcome) for o in got), got
    return list(got)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def server_pid(src: MCPSource) -> int:
    (o,) = outcomes(await src.call_batch([ToolCall("p", "pid", {})]))
    return int(o.text)


# -- configuration --------------------------------------------------------------------------


def test_config_errors_and_names() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        MCPSource()
    with pytest.raises(ConfigError, match="exactly one"):
        MCPSource(["x"], url="http://127.0.0.1:1/mcp")
    with pytest.raises(ConfigError, match="http"):
        MCPSource(url="ftp://example/mcp")
    with pytest.raises(ConfigError, match="program"):
        MCPSource([])
    with pytest.raises(ConfigError, match="call_timeout"):
        MCPSource(["x"], call_timeout=0)
    with pytest.raises(ConfigError, match="max_restarts"):
        MCPSource(["x"], max_restarts=-1)
    assert MCPSource(FLAKY_CMD).name == "flaky_server"
    assert MCPSource("python -m pkg.notes_server").name == "notes_server"
    assert MCPSource("npx -y @modelcontextprotocol/server-memory").name.endswith("server-memory")
    assert MCPSource(url="http://127.0.0.1:8000/mcp").name == "127.0.0.1:8000"
    assert MCPSource(FLAKY_CMD, name="flaky").name == "flaky"
    assert isinstance(MCPSource(FLAKY_CMD), ToolSource)


# -- a healthy server -----------------------------------------------------------------------


@pytest.mark.slow
def test_tools_results_errors_and_timeout_over_one_session() -> None:
    async def main() -> None:
        # call_timeout: room for the calls that must answer in the same batch (the 0.3 s one
        # too) on a busy machine; the one meant to time out sleeps far longer than it
        async with MCPSource(FLAKY_CMD, name="flaky", call_timeout=2.0) as src:
            specs = {s.name: s for s in await src.list_tools()}
            assert {"echo", "fail", "slow", "crash", "protocol_error", "image"} <= set(specs)
            echo = specs["echo"]
            assert echo.description == "Return the text unchanged."
            assert echo.input_schema["type"] == "object"
            assert echo.input_schema["properties"]["text"]["type"] == "string"
            assert echo.input_schema["required"] == ["text"]
            pid = await server_pid(src)

            got = outcomes(
                await src.call_batch(
                    [
                        ToolCall("a", "echo", {"text": "hi"}),
                        ToolCall("b", "fail", {"message": "disk is full"}),
                        ToolCall("c", "image", {}),
                        ToolCall("d", "protocol_error", {}),
                        ToolCall("e", "slow", {"seconds": 600}),
                        ToolCall("f", "slow", {"seconds": 0.3}),
                        ToolCall("g1", "gate", {"key": "batch", "count": 2}),
                        ToolCall("g2", "gate", {"key": "batch", "count": 2}),
                    ]
                )
            )
            assert [o.call_id for o in got] == [*"abcdef", "g1", "g2"]
            ok, failed, image, proto, timed_out, slow_ok, gate1, gate2 = got

            assert not ok.is_error and ok.text == "hi"
            assert failed.is_error and failed.error == "tool_error"
            assert "disk is full" in failed.text
            assert not image.is_error
            assert isinstance(image.content[0], TextBlock)
            assert isinstance(image.content[1], ImageBlock)
            assert image.content[1].media_type == "image/png"
            assert image.content[1].data.startswith("iVBOR")
            assert proto.is_error and proto.error == "mcp_error"
            assert "deliberate protocol error" in proto.text and "-32603" in proto.text
            assert timed_out.is_error and timed_out.error == "timeout"
            assert "timed out after 2 s" in timed_out.text and "`slow`" in timed_out.text
            assert slow_ok.text == "slept 0.3 s"
            assert (gate1.text, gate2.text) == ("met", "met")  # the calls ran concurrently

            # The timeout cancelled one call, not the session.
            again = outcomes(await src.call_batch([ToolCall("g", "echo", {"text": "still"})]))
            assert again[0].text == "still"
            assert await server_pid(src) == pid and src.restarts == 0
        assert not alive(pid)
        assert src.unavailable_reason is None

    run(main())


@pytest.mark.slow
def test_cancelling_a_batch_leaves_the_session_usable() -> None:
    async def main() -> None:
        async with MCPSource(FLAKY_CMD) as src:
            await src.list_tools()
            pid = await server_pid(src)
            task = asyncio.create_task(src.call_batch([ToolCall("a", "slow", {"seconds": 10})]))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            got = outcomes(await src.call_batch([ToolCall("b", "echo", {"text": "ok"})]))
            assert got[0].text == "ok"
            assert await server_pid(src) == pid

            # Closing the source while a batch runs: the call gets an error result.
            batch = asyncio.create_task(src.call_batch([ToolCall("c", "slow", {"seconds": 10})]))
            await asyncio.sleep(0.3)
            await src.aclose()
            (closed,) = outcomes(await batch)
            assert closed.error == "source_closed" and "was closed during the call" in closed.text
        assert not alive(pid)
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

    run(main())


# -- a server that dies ---------------------------------------------------------------------


@pytest.mark.slow
def test_crash_mid_batch_fails_every_running_call_then_restarts() -> None:
    async def main() -> None:
        async with MCPSource(FLAKY_CMD, name="flaky") as src:
            await src.list_tools()
            first = await server_pid(src)
            got = outcomes(
                await src.call_batch(
                    [ToolCall("a", "slow", {"seconds": 10}), ToolCall("b", "crash", {})]
                )
            )
            for o in got:
                assert o.is_error and o.error == "server_exited", o
                assert "the MCP server `flaky` exited while running this call" in o.text
                assert "crashing on purpose" in o.text  # its last words on stderr
                assert "restarted for the next tool call" in o.text
            assert not src.running

            got = outcomes(await src.call_batch([ToolCall("c", "echo", {"text": "back"})]))
            assert got[0].text == "back" and not got[0].is_error
            assert src.restarts == 1
            second = await server_pid(src)
            assert second != first and not alive(first)
        assert not alive(second)

    run(main())


@pytest.mark.slow
def test_server_killed_from_outside_while_a_call_runs() -> None:
    async def main() -> None:
        async with MCPSource(FLAKY_CMD, name="flaky") as src:
            await src.list_tools()
            pid = await server_pid(src)

            # Kill once the quick call's result is in (not after a fixed sleep: on a busy
            # machine 0.4 s may not be enough for it); the slow calls have 10 s to go then.
            quick_done = asyncio.Event()
            call_one = src._call_one

            async def watched_call(conn: Any, call: ToolCall) -> Any:
                outcome = await call_one(conn, call)
                if call.id == "a":
                    quick_done.set()
                return outcome

            src._call_one = watched_call  # type: ignore[method-assign]

            async def kill_soon() -> None:
                await quick_done.wait()
                os.kill(pid, signal.SIGKILL)

            killer = asyncio.create_task(kill_soon())
            got = outcomes(
                await src.call_batch(
                    [
                        ToolCall("a", "echo", {"text": "quick"}),
                        ToolCall("b", "slow", {"seconds": 10}),
                        ToolCall("c", "slow", {"seconds": 10}),
                    ]
                )
            )
            await killer
            src._call_one = call_one  # type: ignore[method-assign]
            assert got[0].text == "quick" and not got[0].is_error  # done before the kill
            for o in got[1:]:
                assert o.error == "server_exited"
                assert "exited while running this call" in o.text

            got = outcomes(await src.call_batch([ToolCall("d", "echo", {"text": "again"})]))
            assert got[0].text == "again"
            assert src.restarts == 1

    run(main())


def test_restarts_are_bounded() -> None:
    async def main() -> None:
        async with MCPSource(FLAKY_CMD, name="flaky", max_restarts=1) as src:
            await src.list_tools()
            got = outcomes(await src.call_batch([ToolCall("a", "crash", {})]))
            assert "1 attempt(s) left" in got[0].text
            got = outcomes(await src.call_batch([ToolCall("b", "crash", {})]))  # restart 1
            assert got[0].error == "server_exited"
            assert "will not be restarted again (max_restarts=1)" in got[0].text
            assert src.restarts == 1
            for call_id in ("c", "d"):
                got = outcomes(await src.call_batch([ToolCall(call_id, "echo", {"text": "x"})]))
                assert got[0].is_error and got[0].error == "unavailable"
                assert "is unavailable" in got[0].text and "max_restarts=1" in got[0].text
            assert src.restarts == 1 and not src.running
            assert src.unavailable_reason and "exited" in src.unavailable_reason

    run(main())


# -- a server that cannot start -------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "cause"),
    [
        (
            ["nbagent-no-such-mcp-server", "--stdio"],
            "command not found: nbagent-no-such-mcp-server",
        ),
        ([*FLAKY_CMD, "--exit-at-start"], "exited during startup"),
    ],
    ids=["not-found", "exits-at-start"],
)
def test_server_that_cannot_start(command: list[str], cause: str) -> None:
    async def main() -> None:
        src = MCPSource(command, name="broken")
        assert await src.list_tools() == []
        assert src.unavailable_reason is not None
        assert cause in src.unavailable_reason
        assert "`broken`" in src.unavailable_reason and command[0] in src.unavailable_reason
        if "--exit-at-start" in command:
            assert "refusing to start (missing configuration)" in src.unavailable_reason
        # Not retried on every listing, and calls (if any come) get error results.
        assert await src.list_tools() == []
        got = outcomes(await src.call_batch([ToolCall("a", "echo", {"text": "x"})]))
        assert got[0].is_error and got[0].error == "unavailable" and cause in got[0].text
        await src.aclose()

        strict = MCPSource(command, name="broken", strict=True)
        with pytest.raises(ConfigError) as info:
            await strict.list_tools()
        assert cause in str(info.value) and command[0] in str(info.value)
        await strict.aclose()

    run(main())


def test_start_timeout() -> None:
    async def main() -> None:
        src = MCPSource([*FLAKY_CMD, "--hang-at-start"], start_timeout=1.0)
        assert await src.list_tools() == []  # (the server never answers: only the timeout ends it)
        assert src.unavailable_reason and "start_timeout=1 s" in src.unavailable_reason
        await src.aclose()

    run(main())


# -- through the agent ----------------------------------------------------------------------


def test_agent_runs_mcp_tools_and_reads_their_errors() -> None:
    model = ScriptedModel(
        [
            Reply(
                text="Let me try both.",
                tool_calls=[
                    ToolUse("echo", {"text": "ping"}, id="call_ok"),
                    ToolUse("fail", {"message": "quota of widgets reached"}, id="call_bad"),
                ],
            ),
            Reply(tool_calls=[ToolUse("crash", {}, id="call_crash")]),
            "One tool failed and the server crashed; here is what I know.",
        ]
    )

    async def main() -> None:
        async with MCPSource(FLAKY_CMD, name="flaky") as src:
            agent = Agent(model, tools=[src])
            result = await agent.run("use the tools", show=False)
            assert result.final_text.startswith("One tool failed")
            frame = agent.attempts
        offered = {t.name for t in model.requests[0].tools}
        assert {"echo", "fail", "crash"} <= offered

        msgs = agent.history
        assert [m.role for m in msgs] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        first = msgs[2].tool_results
        assert [r.tool_use_id for r in first] == ["call_ok", "call_bad"]
        assert [r.is_error for r in first] == [False, True]
        assert "quota of widgets reached" in "".join(
            b.text for b in first[1].content if isinstance(b, TextBlock)
        )
        (crashed,) = msgs[4].tool_results
        assert crashed.is_error and crashed.tool_use_id == "call_crash"
        # The model saw the results in its next requests.
        assert len(model.requests) == 3

        tools = frame[frame["phase"] == "tool"]
        assert list(tools["tool_name"]) == ["flaky:echo", "flaky:fail", "flaky:crash"]
        assert list(tools["outcome"]) == ["ok", "error", "error"]

    run(main())


def test_demo_notes_server() -> None:
    async def main() -> None:
        async with notes_source() as notes:
            assert notes.name == "notes"
            specs = {s.name: s for s in await notes.list_tools()}
            assert set(specs) == {"add_note", "list_notes", "read_note", "delete_note"}
            assert specs["add_note"].input_schema["required"] == ["title", "text"]
            assert not specs["add_note"].description.startswith(" ")
            got = outcomes(
                await notes.call_batch(
                    [
                        ToolCall("a", "add_note", {"title": "groceries", "text": "eggs, milk"}),
                        ToolCall("b", "list_notes", {}),
                    ]
                )
            )
            assert "Saved note 'groceries'" in got[0].text
            got = outcomes(
                await notes.call_batch(
                    [
                        ToolCall("c", "read_note", {"title": "groceries"}),
                        ToolCall("d", "read_note", {"title": "todo"}),
                        ToolCall("e", "list_notes", {}),
                    ]
                )
            )
            assert got[0].text == "eggs, milk" and not got[0].is_error
            assert got[1].is_error
            assert "no note titled 'todo'" in got[1].text and "'groceries'" in got[1].text
            assert "groceries" in got[2].text

    run(main())


@pytest.mark.slow
def test_notes_server_saves_to_a_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"

    async def main() -> None:
        async with MCPSource(notes_server_command(str(path)), name="notes") as notes:
            await notes.list_tools()
            await notes.call_batch([ToolCall("a", "add_note", {"title": "t", "text": "x"})])
        async with MCPSource(notes_server_command(str(path)), name="notes") as notes:
            await notes.list_tools()
            got = outcomes(await notes.call_batch([ToolCall("b", "read_note", {"title": "t"})]))
            assert got[0].text == "x"

    run(main())


@pytest.mark.slow
def test_a_new_event_loop_starts_a_new_server_without_counting_a_restart() -> None:
    """`agent.run_sync` runs each run in its own `asyncio.run`; the source follows along."""
    src = MCPSource(FLAKY_CMD)

    async def first() -> int:
        await src.list_tools()
        return await server_pid(src)

    async def second() -> int:
        pid = await server_pid(src)
        await src.aclose()
        return pid

    pid1 = run(first())  # not closed: asyncio.run's teardown stops the runner and the server
    assert not alive(pid1)
    pid2 = run(second())
    assert pid2 != pid1 and src.restarts == 0 and not alive(pid2)


# -- streamable HTTP ------------------------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [*FLAKY_CMD, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the HTTP MCP server did not come up")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait()


def test_streamable_http_server(http_server: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = http_server

    async def main() -> None:
        # Only the call meant to time out goes through the session with a short call_timeout:
        # the others, and the call the server's death must end, have the default one, so a busy
        # machine cannot turn their answers (or the death) into a timeout.
        async with MCPSource(url=url, name="web-tight", call_timeout=1.0) as tight:
            (late,) = outcomes(await tight.call_batch([ToolCall("c", "slow", {"seconds": 600})]))
            assert late.error == "timeout" and "timed out after 1 s" in late.text
        async with MCPSource(url=url, name="web", max_restarts=1) as src:
            assert "echo" in {s.name for s in await src.list_tools()}
            got = outcomes(
                await src.call_batch(
                    [
                        ToolCall("a", "echo", {"text": "over http"}),
                        ToolCall("b", "fail", {"message": "nope"}),
                    ]
                )
            )
            assert got[0].text == "over http"
            assert got[1].is_error and "nope" in got[1].text

            async def kill_soon() -> None:
                await asyncio.sleep(0.3)
                proc.kill()

            killer = asyncio.create_task(kill_soon())
            got = outcomes(await src.call_batch([ToolCall("d", "slow", {"seconds": 600})]))
            await killer
            assert got[0].error == "server_exited"
            assert "connection to MCP server `web`" in got[0].text and "was lost" in got[0].text
            # The server is gone for good: reconnecting fails, visibly.
            got = outcomes(await src.call_batch([ToolCall("e", "echo", {"text": "x"})]))
            assert got[0].error == "unavailable" and "could not restart" in got[0].text

    run(main())


def test_content_and_listing_conversions() -> None:
    from mcp import types

    src = MCPSource(FLAKY_CMD, name="conv")
    tools = [
        types.Tool(name="ok_tool", description="fine", input_schema={"type": "object"}),
        types.Tool(name="bad.name/with slash", input_schema={"type": "object"}),
        types.Tool(name="ok_tool", input_schema={"type": "object"}),
    ]
    specs = src._to_specs(tools)
    assert [s.name for s in specs] == ["ok_tool"]
    assert specs[0].input_schema == {"type": "object", "properties": {}}
    assert set(src.skipped_tools) == {"bad.name/with slash", "ok_tool"}

    result = types.CallToolResult(
        content=[
            types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text="hello"),
            ),
            types.ResourceLink(type="resource_link", uri="file:///b.bin", name="b"),
        ],
        is_error=False,
    )
    out = to_outcome(ToolCall("x", "t", {}), result)
    texts = [b.text for b in out.content if isinstance(b, TextBlock)]
    assert "audio/wav" in texts[0]
    assert texts[1] == "[resource file:///a.txt]\nhello"
    assert texts[2] == "[resource link b: file:///b.bin]"

    structured = types.CallToolResult(content=[], structured_content={"n": 1}, is_error=False)
    assert to_outcome(ToolCall("y", "t", {}), structured).text == '{"n": 1}'
    empty_error = types.CallToolResult(content=[], is_error=True)
    o = to_outcome(ToolCall("z", "t", {}), empty_error)
    assert o.is_error and o.error == "tool_error" and o.text


def test_secrets_in_the_command_line_or_url_are_masked() -> None:
    src = MCPSource(["server", "--api-key", "sk-123", "--token=abc", "--verbose", "path"])
    assert "sk-123" not in repr(src) and "abc" not in src.target
    assert src.target == "server --api-key '***' '--token=***' --verbose path"
    web = MCPSource(url="https://user:pw@mcp.example.com/mcp?key=s3cret")
    assert web.target == "https://mcp.example.com/mcp?***" and web.name == "mcp.example.com"

    async def main() -> None:
        broken = MCPSource(["nbagent-no-such-server", "--api-key", "sk-123"])
        assert await broken.list_tools() == []
        assert broken.unavailable_reason and "sk-123" not in broken.unavailable_reason

    run(main())


# -- a remote server behind a bearer token ----------------------------------------------------

TOKEN = "mcp-tok-SENTINEL9f8e7d6c5b4a39281706"
TOKEN_PART = "SENTINEL9f8e7d6c"  # a leak of part of the token counts too
WRONG = "mcp-tok-WRONG00112233445566778899"


def assert_no_token(what: str, text: str) -> None:
    for secret in (TOKEN, TOKEN_PART, WRONG):
        assert secret not in text, f"a token leaked into {what}"


@pytest.fixture
def token_server() -> Iterator[str]:
    """The flaky server over streamable HTTP, refusing any request without the token (its 401
    page quotes the credentials it got)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [*FLAKY_CMD, "--http", str(port), "--token", TOKEN],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):  # up to 20 s for the server to listen
            if proc.poll() is not None:
                pytest.fail("the token-protected MCP server exited")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the token-protected MCP server did not come up")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_a_server_behind_a_bearer_token(token_server: str) -> None:
    from nbagent.notebook._state import TimelineState

    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    events: list[Any] = []
    state = TimelineState()
    texts: list[str] = []
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    ToolUse("echo", {"text": "over a token"}, id="c1"),
                    ToolUse("whoami", {}, id="c2"),
                ]
            ),
            "Both tools answered.",
        ]
    )

    async def main() -> None:
        good = MCPSource(url=token_server, headers={"Authorization": f"Bearer {TOKEN}"})
        texts.extend([repr(good), good.target, str(good.headers)])
        assert good.headers == {"Authorization": "***"}
        async with good:
            agent = Agent(model, tools=[good], subscribers=[events.append, state])
            result = await agent.run("use the tools", show=False)
            assert result.final_text == "Both tools answered."
            texts.append(agent.attempts.to_csv())
        (results,) = [m.tool_results for m in agent.history if m.tool_results]
        assert [r.is_error for r in results] == [False, False]
        echoed = [b.text for r in results for b in r.content if isinstance(b, TextBlock)]
        # The server did get the token; what it echoed back is masked before anyone sees it.
        assert echoed == ["over a token", "you sent: ***"]

        for headers, given in (
            ({"Authorization": f"Bearer {WRONG}"}, "check the headers= given"),
            (None, "check no credentials (pass headers=)"),
        ):
            bad = MCPSource(url=token_server, headers=headers, name="guarded")
            assert await bad.list_tools() == []
            reason = bad.unavailable_reason or ""
            assert "cannot start MCP server `guarded`" in reason
            assert (
                f"the server refused the connection with HTTP 401 Unauthorized: {given}" in reason
            )
            (o,) = outcomes(await bad.call_batch([ToolCall("x", "echo", {"text": "x"})]))
            assert o.is_error and o.error == "unavailable"
            texts.extend([reason, o.text, repr(bad)])
            await bad.aclose()

            strict = MCPSource(url=token_server, headers=headers, strict=True)
            with pytest.raises(ConfigError) as info:
                await strict.list_tools()
            assert "HTTP 401 Unauthorized" in str(info.value)
            texts.append(str(info.value) + repr(info.value))
            await strict.aclose()

    try:
        run(main())
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)

    assert_no_token("reprs, reasons and error results", "\n".join(texts))
    assert_no_token("events", "\n".join(repr(e) for e in events))
    assert_no_token("the widget state", json.dumps(state.snapshot(), default=str))
    assert_no_token("the DEBUG log", log.getvalue())
    # The SDK did log what the server echoed, and the token came out masked.
    assert "you sent: ***" in log.getvalue()


def test_headers_are_checked_and_never_quoted() -> None:
    with pytest.raises(ConfigError, match="pass url=") as info:
        MCPSource(FLAKY_CMD, headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(ConfigError, match="takes a dict"):
        MCPSource(url="http://127.0.0.1:1/mcp", headers=[("Authorization", TOKEN)])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'X-Key' has a int value") as info:
        MCPSource(url="http://127.0.0.1:1/mcp", headers={"X-Key": 123})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="line break") as info:
        MCPSource(url="http://127.0.0.1:1/mcp", headers={"Authorization": f"Bearer {TOKEN}\n"})
    assert_no_token("a ConfigError", str(info.value))
