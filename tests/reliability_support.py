"""Shared checks for the reliability tests: conversation invariants and leak detection.

Used by test_chaos, test_cancellation, test_persistence and test_secrets. Nothing here relaxes
a check: every helper raises AssertionError naming what is wrong.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from nbagent import errors as E
from nbagent._core._messages import Message
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    Event,
    RunFinished,
    RunStarted,
)

# Every typed error of DESIGN.md's table ("The four actions"). A run must end in success or one
# of these; anything else (a bare ValueError, ScriptExhausted, a CancelledError leaking out of
# `run`) is a bug.
TABLE_ERRORS: tuple[type[BaseException], ...] = (
    E.RateLimited,  # includes QuotaExceeded
    E.Overloaded,
    E.ServerError,
    E.TransportError,
    E.StreamInterrupted,
    E.EmptyResponse,
    E.ContextOverflow,
    E.AuthFailed,
    E.ModelNotFound,
    E.BadRequest,
    E.InvalidResponse,
    E.ContentFiltered,
    E.ConfigError,
    E.Aborted,
    E.HostError,
    E.BudgetExceeded,
    E.LengthResumeExhausted,
)


def check_conversation(messages: Sequence[Message], *, where: str = "history") -> None:
    """Every tool_use has exactly one tool_result, in the next user message, in call order;
    no tool_result answers nothing; roles alternate sensibly; no message is empty."""
    seen_ids: set[str] = set()
    for i, m in enumerate(messages):
        assert m.blocks, f"{where}[{i}] is an empty {m.role} message"
        uses = m.tool_uses if m.role == "assistant" else []
        if m.role == "assistant":
            assert not m.tool_results, f"{where}[{i}]: an assistant message holds tool results"
        for u in uses:
            assert u.id not in seen_ids, f"{where}[{i}]: tool_use id {u.id} appears twice"
            seen_ids.add(u.id)
        if uses:
            assert i + 1 < len(messages), f"{where}[{i}]: tool calls without a following result"
            nxt = messages[i + 1]
            assert nxt.role == "user", f"{where}[{i + 1}] must be the tool results (user)"
            got = [r.tool_use_id for r in nxt.tool_results]
            want = [u.id for u in uses]
            assert got == want, f"{where}[{i + 1}]: results {got} do not answer calls {want}"
            # results come first in the message, before any note
            head = nxt.blocks[: len(want)]
            assert [getattr(b, "tool_use_id", None) for b in head] == want
        if m.role == "user" and m.tool_results:
            prev = messages[i - 1] if i > 0 else None
            assert prev is not None and prev.role == "assistant" and prev.tool_uses, (
                f"{where}[{i}]: tool results with no tool calls before them"
            )


def check_no_duplicates(messages: Sequence[Message], *, where: str = "transcript") -> None:
    """No assistant message is committed twice (each one the model produced is unique)."""
    seen: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m.role != "assistant":
            continue
        key = json.dumps(m.to_dict(), sort_keys=True)
        assert key not in seen, f"{where}[{i}] duplicates {where}[{seen[key]}]: {key[:200]}"
        seen[key] = i


def check_no_marker(messages: Sequence[Message], marker: str, *, where: str = "history") -> None:
    """Text a broken attempt streamed (tagged with `marker`) never reaches the conversation."""
    for i, m in enumerate(messages):
        text = json.dumps(m.to_dict())
        assert marker not in text, f"{where}[{i}] holds partial text ({marker}): {text[:200]}"


def check_run_events(events: Sequence[Event]) -> None:
    """One run's events: RunStarted first, RunFinished last and once; every attempt closes."""
    assert events, "a run emitted no events"
    assert isinstance(events[0], RunStarted), f"first event is {type(events[0]).__name__}"
    assert isinstance(events[-1], RunFinished), f"last event is {type(events[-1]).__name__}"
    assert sum(isinstance(e, RunStarted) for e in events) == 1
    assert sum(isinstance(e, RunFinished) for e in events) == 1
    started = sum(isinstance(e, AttemptStarted) for e in events)
    ended = sum(isinstance(e, (AttemptSucceeded, AttemptFailed)) for e in events)
    assert started == ended, f"{started} attempts started but {ended} ended"


async def check_no_other_tasks(spins: int = 20) -> None:
    """Inside a loop: no task but the current one is left pending.

    The loop finalises an async generator that was dropped unfinished (httpx's own byte
    iterators, when a stream is closed early) in a task of its own, which ends within a loop
    iteration or two; those get `spins` iterations to finish. A task that is still pending
    after that (a tool call nobody cancelled, a sleep) fails the check.
    """
    current = asyncio.current_task()
    left: list[asyncio.Task[object]] = []
    for _ in range(spins):
        left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        if not left:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"tasks left running: {left}")


@contextmanager
def no_leaks() -> Iterator[list[str]]:
    """Fail on ResourceWarning, "coroutine was never awaited" and any unraisable exception.

    Warnings raised inside `__del__` are unraisable: they go to `sys.unraisablehook`, which this
    replaces for the duration, then collects garbage twice so finalisers run before checking.
    """
    problems: list[str] = []
    old_hook = sys.unraisablehook

    def hook(u: Any) -> None:
        problems.append(f"{u.exc_type.__name__}: {u.exc_value} (in {u.object!r})")

    sys.unraisablehook = hook
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield problems
            gc.collect()
            gc.collect()
        # Under the project's filterwarnings=error every warning is a failure; recording them
        # here (instead of raising at the first) reports all of them at once.
        problems.extend(f"{w.category.__name__}: {w.message}" for w in caught)
    finally:
        sys.unraisablehook = old_hook
    assert not problems, "leaked resources or unawaited coroutines:\n" + "\n".join(problems)
