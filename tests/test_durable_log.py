"""The durable attempt log: `Agent(log=...)` writes, `analysis.read_attempts` reads back.

Real agents in virtual time (a scripted model) write to real SQLite files in a temporary folder;
what comes back must be the frame `agent.attempts` holds. A file that cannot be written never
changes how a run ends; a file that is not ours, or is newer than us, is refused at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

import nbagent
from nbagent import (
    Agent,
    Reply,
    RetryPolicy,
    ScriptedModel,
    ToolUse,
    VirtualClock,
    analysis,
    fault,
    tool,
)
from nbagent import errors as E
from nbagent._loop._durable_layout import SCHEMA_VERSION
from nbagent._loop._frame import COLUMNS, ORIGIN_COLUMNS
from nbagent.analysis import read_attempts

SECRET = "sk-ant-api03-NEVER-ON-DISK-0123456789abcdef"


@tool
def broken(x: int) -> str:
    """A tool whose handler always raises."""
    raise ValueError(f"cannot handle {x}")


def script() -> list[Any]:
    return [
        fault("503"),
        fault("429", retry_after=2.0),
        Reply(tool_calls=[ToolUse("broken", {"x": 7})]),
        "done",
    ]


def make(log: Any = None, entries: list[Any] | None = None, **kw: Any) -> Agent:
    kw.setdefault("retry", RetryPolicy(seed=0))
    return Agent(
        ScriptedModel(script() if entries is None else entries, model=kw.pop("model", "m")),
        clock=VirtualClock(),
        tools=[broken],
        limiter=False,
        log=log,
        **kw,
    )


def run(agent: Agent, prompt: str = "go") -> Any:
    """One run; `run_sync` closes the log afterwards, so every row is committed."""
    return agent.run_sync(prompt, show=False)


@contextlib.contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to look into or alter a file, committed and then closed. (`with
    sqlite3.connect(...)` only commits: the connection is left to the garbage collector, which
    Python 3.13 warns about.)"""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        yield conn


def attempts_only(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=list(ORIGIN_COLUMNS)).reset_index(drop=True)


def test_every_attempt_is_in_the_file_typed_exactly_like_agent_attempts(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    agent = make(str(path))
    assert run(agent).final_text == "done"
    df = read_attempts(path)
    assert list(df.columns) == [*COLUMNS, *ORIGIN_COLUMNS]
    pd.testing.assert_frame_equal(attempts_only(df), agent.attempts)
    assert list(df.action) == ["retry", "retry", "none", "tool_result", "none"]
    assert df.retry_after_s.iloc[1] == 2.0 and df.delay_s.iloc[1] == 2.0  # completed after the end
    assert set(df.agent_id) == {agent.agent_id}
    assert set(df.worker) == {f"{socket.gethostname()}:{os.getpid()}"}
    with opened(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    # the analysis functions and plots take it unchanged
    assert int(analysis.summary(df)["count"].sum()) == len(df)
    assert isinstance(analysis.plot_timeline(df), Figure)
    assert isinstance(analysis.plot_backoff(df), Figure)


def test_sessions_add_up_and_since_and_model_pick_among_them(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    first = make(path, model="alpha")
    run(first)
    middle = time.time()
    second = make(path, entries=["plain answer"], model="beta")
    run(second)
    df = read_attempts(path)
    assert df.agent_id.value_counts().to_dict() == {first.agent_id: 5, second.agent_id: 1}
    later = read_attempts(path, since=middle)
    assert list(later.agent_id) == [second.agent_id]
    assert len(read_attempts(path, since=timedelta(hours=1))) == 6
    assert len(read_attempts(path, since=datetime.now() + timedelta(hours=1))) == 0
    alpha = read_attempts(path, model="scripted:alpha")
    # its requests, and the tool call of the run that used it
    assert list(alpha.phase) == ["request", "request", "request", "tool", "request"]
    assert set(alpha.agent_id) == {first.agent_id}
    both = read_attempts(str(path), model=["scripted:alpha", "scripted:beta"])
    assert len(both) == 6
    with pytest.raises(E.ConfigError, match="since= takes"):
        read_attempts(path, since="sometime soon")


def test_run_sync_closes_the_log_after_each_run_and_the_next_run_reopens_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    agent = make(path, entries=["one", "two"])
    agent.run_sync("first", show=False)
    agent.run_sync("second", show=False)
    df = read_attempts(path)
    assert len(df) == 2 and df.run_id.nunique() == 2
    pd.testing.assert_frame_equal(attempts_only(df), agent.attempts)


def test_map_passes_log_to_every_agent(tmp_path: Path) -> None:
    path = tmp_path / "batch.sqlite"
    out = nbagent.map(["What is 2+2?", "Say hi.", "Name a colour."], log=path, show=False)
    assert out.results.error.isna().all()
    df = read_attempts(path)
    assert df.agent_id.nunique() == 3
    assert sorted(df.run_id.unique()) == sorted(out.results.run_id)
    assert len(df) == len(out.attempts)


def test_an_open_connection_is_written_and_read(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False)
    agent = make(conn)
    run(agent)
    pd.testing.assert_frame_equal(attempts_only(read_attempts(conn)), agent.attempts)
    conn.close()
    tied = sqlite3.connect(tmp_path / "other.sqlite")  # usable only from the thread that made it
    with pytest.raises(E.ConfigError, match="check_same_thread=False"):
        make(tied)
    tied.close()


def test_keys_never_reach_the_file(tmp_path: Path) -> None:
    from nbagent.mock import MockServer
    from nbagent.providers import AnthropicProvider

    path = tmp_path / "runs.sqlite"
    with MockServer() as server:
        server.set_faults(["503", "401"])
        agent = Agent(
            AnthropicProvider("demo", api_key=SECRET, base_url=server.url),
            retry=RetryPolicy(initial_delay=0.01, seed=1),
            limiter=False,
            log=path,
        )
        with pytest.raises(E.AuthFailed):
            run(agent)
    df = read_attempts(path)
    assert list(df.error_kind) == ["ServerError", "AuthFailed"]
    for f in tmp_path.iterdir():
        assert SECRET.encode() not in f.read_bytes()
        assert SECRET[-16:].encode() not in f.read_bytes()


# -- files that are not ours, newer, or older ------------------------------------------------------


def test_a_newer_file_is_refused_with_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    run(make(path))
    with opened(path) as conn:
        conn.execute(
            "UPDATE nbagent_meta SET value = ? WHERE key = 'version'", (str(SCHEMA_VERSION + 1),)
        )
    with pytest.raises(E.ConfigError, match="written by a newer nbagent .* upgrade nbagent"):
        read_attempts(path)
    with pytest.raises(E.ConfigError, match="written by a newer nbagent"):
        make(path)


def test_foreign_files_are_refused_and_left_as_they_were(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.sqlite"
    with opened(theirs) as conn:
        conn.execute("CREATE TABLE measurements (t REAL, value REAL)")
    before = theirs.read_bytes()
    with pytest.raises(E.ConfigError, match="not an nbagent attempt log .*measurements"):
        make(theirs)
    with pytest.raises(E.ConfigError, match="not an nbagent attempt log"):
        read_attempts(theirs)
    assert theirs.read_bytes() == before
    text = tmp_path / "notes.sqlite"
    text.write_text("these are my notes, not a database\n" * 20)
    with pytest.raises(E.ConfigError, match="not an nbagent attempt log"):
        make(text)
    with pytest.raises(E.ConfigError, match="not an nbagent attempt log"):
        read_attempts(text)
    assert text.read_text().startswith("these are my notes")
    with pytest.raises(E.ConfigError, match="there is no attempt log at"):
        read_attempts(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()
    with pytest.raises(E.ConfigError, match="log= takes a file path"):
        make(42)


def test_an_older_layout_is_read_and_migrated_when_written_to(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    old = make(path)
    run(old)
    with opened(path) as conn:  # as written before the cache columns existed
        conn.execute("ALTER TABLE attempts DROP COLUMN cache_read_tokens")
        conn.execute("ALTER TABLE attempts DROP COLUMN cache_write_tokens")
        conn.execute("UPDATE nbagent_meta SET value = '0' WHERE key = 'version'")
    df = read_attempts(path)
    assert list(df.columns) == [*COLUMNS, *ORIGIN_COLUMNS] and len(df) == 5
    assert df.cache_read_tokens.isna().all() and str(df.cache_read_tokens.dtype) == "Int64"
    pd.testing.assert_frame_equal(
        attempts_only(df).drop(columns=["cache_read_tokens", "cache_write_tokens"]),
        old.attempts.drop(columns=["cache_read_tokens", "cache_write_tokens"]),
    )
    new = make(path, entries=["fine"])
    run(new)
    with opened(path) as conn:
        assert conn.execute("SELECT value FROM nbagent_meta WHERE key = 'version'").fetchone() == (
            str(SCHEMA_VERSION),
        )
    df = read_attempts(path)
    assert len(df) == 6 and df.cache_read_tokens.iloc[-1] == 0


def test_a_log_written_before_the_reask_column_reads_it_empty_and_gains_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    run(make(path))
    with opened(path) as conn:  # as written before issue 37: same layout version, no `reask`
        conn.execute("ALTER TABLE attempts DROP COLUMN reask")
    df = read_attempts(path)
    assert list(df.columns) == [*COLUMNS, *ORIGIN_COLUMNS] and len(df) == 5
    assert df.reask.isna().all() and str(df.reask.dtype) == "Int64"
    run(make(path, entries=["fine"]))  # written to again: the column is added, and filled
    df = read_attempts(path)
    assert len(df) == 6 and df.reask.iloc[-1] == 0 and df.reask.iloc[:5].isna().all()


# -- a file that cannot be written: warn, and the run ends as it would have ---------------------


def baseline() -> tuple[Any, pd.DataFrame]:
    agent = make()
    return run(agent), agent.attempts


def same_run(result: Any, agent: Agent) -> None:
    expected, frame = baseline()
    assert (result.final_text, result.end_reason, result.turns) == (
        expected.final_text,
        expected.end_reason,
        expected.turns,
    )
    pd.testing.assert_frame_equal(
        agent.attempts.drop(columns="run_id"), frame.drop(columns="run_id")
    )


def test_a_read_only_database_warns_with_a_host_error_sentence_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    run(make(path, entries=["earlier"]))
    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    agent = make(read_only)
    with pytest.warns(RuntimeWarning, match=r"runs go on .* agent\.attempts keeps every row") as w:
        result = run(agent)
    (warning,) = w.list
    assert "readonly" in str(warning.message) and "durable attempt log" in str(warning.message)
    assert isinstance(agent._durable.error, E.HostError)  # type: ignore[union-attr]
    same_run(result, agent)
    assert len(read_attempts(path)) == 1  # only the earlier run's row
    read_only.close()


def test_a_full_disk_warns_keeps_whole_rows_only_and_the_run_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    run(make(path, entries=["earlier"]))
    conn = sqlite3.connect(path, check_same_thread=False)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow: a full disk
    entries = [fault("503", message="x" * 400)] * 29 + ["done"]
    agent = make(conn, entries=entries, retry=RetryPolicy(max_attempts=30, seed=0))
    with pytest.warns(RuntimeWarning, match="database or disk is full"):
        result = run(agent)
    assert result.final_text == "done" and len(agent.attempts) == 30
    conn.close()
    df = read_attempts(path)
    saved = df[df.agent_id == agent.agent_id]
    assert len(saved) < 30  # the batches from the one that filled the disk on are not saved
    # whatever was saved is whole: the same rows as in memory
    pd.testing.assert_frame_equal(
        attempts_only(saved), agent.attempts.iloc[: len(saved)].reset_index(drop=True)
    )


def test_a_path_that_cannot_be_opened_warns_at_once_and_runs_still_work(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.warns(RuntimeWarning, match="unable to open database file"):
        agent = make(blocker / "runs.sqlite")
    result = run(agent)
    same_run(result, agent)


# -- every connection is closed where it was opened ------------------------------------------------


def closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.total_changes  # noqa: B018 - raises once closed
    except sqlite3.ProgrammingError:
        return True
    return False


def files_held_open(folder: Path) -> list[str]:
    """The files under `folder` this process has open (Linux's /proc; elsewhere none seen)."""
    fds = Path("/proc/self/fd")
    held = []
    for fd in fds.iterdir() if fds.is_dir() else []:
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith(str(folder)):
                held.append(target)
    return held


def test_every_connection_nbagent_opens_it_closes_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No connection is left to the garbage collector, which closes it silently before 3.13 and
    warns (`ResourceWarning: unclosed database`) from 3.13 on. The connections opened are held
    here, so the collector cannot close them behind the test's back, on any Python."""
    path = tmp_path / "runs.sqlite"
    run(make(path))
    newer, foreign, text = tmp_path / "newer.sqlite", tmp_path / "theirs.sqlite", tmp_path / "t"
    run(make(newer, entries=["x"]))
    with opened(newer) as conn:
        conn.execute("UPDATE nbagent_meta SET value = '99' WHERE key = 'version'")
    with opened(foreign) as conn:
        conn.execute("CREATE TABLE measurements (t REAL)")
    text.write_text("not a database\n" * 50)
    sqlite3.connect(tmp_path / "empty.sqlite").close()

    seen: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kw: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kw)
        seen.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    run(make(path, entries=["again"]))
    assert len(read_attempts(path)) == 6 and len(read_attempts(path, model="scripted:m")) == 6
    for refused in (newer, foreign, text):
        with pytest.raises(E.ConfigError):
            make(refused)
        with pytest.raises(E.ConfigError):
            read_attempts(refused)
    with pytest.raises(E.ConfigError, match="empty database"):
        read_attempts(tmp_path / "empty.sqlite")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.warns(RuntimeWarning, match="unable to open database file"):
        run(make(blocker / "runs.sqlite"))
    # an agent used with `await agent.run(...)` and never closed, then dropped: once collected,
    # its rows are committed and the file closed
    abandoned = make(path, entries=["left open"])
    runner = threading.Thread(target=asyncio.run, args=(abandoned.run("go", show=False),))
    runner.start()
    runner.join()
    del abandoned
    gc.collect()
    deadline = time.monotonic() + 60.0  # the writer thread closes it: wait for that, boundedly
    while time.monotonic() < deadline and not (
        all(closed(c) for c in seen) and files_held_open(tmp_path) == []
    ):
        time.sleep(0.01)

    assert len(seen) >= 10  # every path above opened its own
    assert [c for c in seen if not closed(c)] == []
    assert files_held_open(tmp_path) == []
    assert len(read_attempts(path)) == 7  # the abandoned agent's row was committed first
