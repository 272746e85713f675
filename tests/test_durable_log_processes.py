"""The durable log across processes: a kernel killed mid-retries, and two writers at once.

Each test runs real agents in child processes (`python -c`), against the loopback mock server or
a scripted model, writing to one SQLite file in a temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, ScriptedModel, VirtualClock
from nbagent.analysis import read_attempts

KILLED_MID_RETRIES = """
import asyncio, sys
from nbagent import Agent, RetryPolicy
from nbagent.events import RetryScheduled
from nbagent.mock import serve

def report(event):
    if isinstance(event, RetryScheduled):
        print("waiting", event.attempt, event.delay_s, flush=True)

policy = RetryPolicy(max_attempts=10, initial_delay=0.01, max_retry_after=120, seed=1)
with serve(["500", "503", "429:retry_after=60"]) as server:  # the third wait is slow
    agent = Agent("demo", base_url=server.url, retry=policy, limiter=False, log=sys.argv[1],
                  subscribers=[report])
    asyncio.run(agent.run("Tell me about backoff.", show=False))
print("the run ended, which it must not before the kill", flush=True)
"""

THOUSAND_ATTEMPTS = """
import sys
from nbagent import Agent, RetryPolicy, ScriptedModel, VirtualClock, fault

print("ready", flush=True)
sys.stdin.readline()  # both processes start writing together
model = ScriptedModel([fault("500")] * 999 + ["done"])
policy = RetryPolicy(max_attempts=1000, initial_delay=0.001, max_delay=0.001, seed=0)
agent = Agent(model, clock=VirtualClock(), retry=policy, limiter=False, log=sys.argv[1])
result = agent.run_sync("go", show=False)
print(agent.agent_id, len(agent.attempts), result.final_text, flush=True)
"""


def child(code: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, MPLBACKEND="Agg"),
        **kw,
    )


def rows_when(path: Path, ready: Any, timeout: float = 30.0) -> Any:
    """Poll the file (as another reader would) until `ready(frame)`; the frame, or a failure."""
    deadline = time.monotonic() + timeout
    while True:
        df = read_attempts(path) if path.exists() else None
        if df is not None and ready(df):
            return df
        if time.monotonic() > deadline:
            pytest.fail(f"the rows never reached the file: {df}")
        time.sleep(0.05)


def test_a_run_killed_mid_retries_leaves_every_finished_attempt_whole_in_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    proc = child(KILLED_MID_RETRIES, str(path))
    try:
        assert proc.stdout is not None
        seen = [proc.stdout.readline().split() for _ in range(3)]
        if not all(seen):
            proc.kill()
            pytest.fail(f"the child stopped early: {proc.stderr.read()}")  # type: ignore[union-attr]
        assert [line[:2] for line in seen] == [["waiting", "1"], ["waiting", "2"], ["waiting", "3"]]
        assert float(seen[2][2]) == 60.0  # now in the server's 60 s wait, mid-retries
        # the three attempts that ended are on disk while the run is still going
        rows_when(path, lambda df: len(df) == 3 and df.delay_s.notna().all())
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]

    df = read_attempts(path)
    assert list(df.attempt) == [1, 2, 3]
    assert list(df.error_kind) == ["ServerError", "ServerError", "RateLimited"]
    assert list(df.status_code) == [500, 503, 429]
    assert list(df.action) == ["retry"] * 3 and list(df.outcome) == ["error"] * 3
    assert df.retry_after_s.iloc[2] == 60.0 and df.delay_s.iloc[2] == 60.0
    assert df.ended_at.notna().all() and df.model.notna().all() and df.request_id.notna().all()
    with contextlib.closing(sqlite3.connect(path)) as conn:  # closed, not left to the gc
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # the killed writer left no lock behind: the next session appends
    agent = Agent(ScriptedModel(["after the crash"]), clock=VirtualClock(), log=path)
    agent.run_sync("hello again", show=False)
    assert len(read_attempts(path)) == 4


def test_two_processes_writing_a_thousand_attempts_each_at_once_lose_none(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.sqlite"
    procs = [child(THOUSAND_ATTEMPTS, str(path), stdin=subprocess.PIPE) for _ in range(2)]
    outputs = []
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:  # go: both create the file's tables and write at the same time
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            assert "RuntimeWarning" not in err, err  # the log never gave up
            outputs.append(out.split())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert [o[1:] for o in outputs] == [["1000", "done"], ["1000", "done"]]
    df = read_attempts(path)
    assert len(df) == 2000
    assert sorted(df.agent_id.unique()) == sorted(o[0] for o in outputs)
    assert df.worker.nunique() == 2
    for _, rows in df.groupby("agent_id"):
        assert sorted(rows.attempt) == list(range(1, 1001))
        # every failed row was written twice (ended, then completed with its wait): no update lost
        failed = rows[rows.outcome == "error"]
        assert len(failed) == 999 and failed.delay_s.notna().all()
