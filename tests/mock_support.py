"""Helpers for the mock server's tests: a small SSE decoder of their own, the batch fixtures and
a shape check against them, a batch clock moved by hand, and `nbagent serve` in a process.

It is deliberately not nbagent's parser: the mock's wire output is checked by a second reader.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def sse_events(raw: bytes | str) -> list[tuple[str | None, str]]:
    """Decode raw SSE into (event name, data) pairs; comment lines are skipped."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    events: list[tuple[str | None, str]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if name is not None or data:
            events.append((name, "\n".join(data)))
    return events


# --- provider batch wire shapes (tests/fixtures/batches) ----------------------------------------

BATCH_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "batches"


def batch_fixture(name: str) -> list[Any]:
    """A batch fixture's JSON values (one for .json, one per line for .jsonl), after its
    ``# source:`` line."""
    text = (BATCH_FIXTURES / name).read_text(encoding="utf-8")
    source, _, body = text.partition("\n")
    assert source.startswith("# source: "), name
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in body.splitlines() if line.strip()]
    return [json.loads(body)]


def assert_shape(
    expected: Any,
    got: Any,
    *,
    depth: int = 4,
    nullable: frozenset[str] = frozenset(),
    free: frozenset[str] = frozenset(),
    at: str = "$",
) -> None:
    """``got`` has the fixture's shape: the same keys at every level down to ``depth``, and the
    same JSON types at the leaves (None against a value only for a key in ``nullable``; the keys
    in ``free`` hold maps of the caller's own, compared as maps only)."""
    if depth == 0:
        return
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{at}: {got!r} is not an object"
        assert set(got) == set(expected), f"{at}: keys differ by {sorted(set(got) ^ set(expected))}"
        for key, value in expected.items():
            here = f"{at}.{key}"
            if value is None or got[key] is None:
                assert key in nullable or value is got[key], f"{here}: {got[key]!r} vs {value!r}"
            elif key in free:
                assert isinstance(got[key], dict), f"{here}: {got[key]!r} is not a map"
            else:
                assert_shape(
                    value, got[key], depth=depth - 1, nullable=nullable, free=free, at=here
                )
    elif isinstance(expected, list):
        assert isinstance(got, list), f"{at}: {got!r} is not a list"
        if expected and got:
            assert_shape(
                expected[0], got[0], depth=depth - 1, nullable=nullable, free=free, at=f"{at}[0]"
            )
    elif isinstance(expected, bool) or not isinstance(expected, (int, float)):
        assert type(got) is type(expected), f"{at}: {got!r} is not like {expected!r}"
    else:
        assert isinstance(got, (int, float)) and not isinstance(got, bool), f"{at}: {got!r}"


class BatchClock:
    """A batch clock a test moves by hand (seconds since the epoch)."""

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def positions_sent(mock: Any) -> dict[int, int]:
    """How often each prompt position was submitted to a `MockServer`'s batches (nbagent's
    custom ids are `<run>-<position>-<submission>`)."""
    sent: Counter[int] = Counter()
    for cid, n in mock.submitted_ids().items():
        sent[int(cid.split("-")[1])] += n
    return dict(sent)


@contextmanager
def serve_process(*args: str) -> Iterator[str]:
    """`nbagent serve ARGS` in a process of its own: yields the URL it prints on its first line,
    and stops it with Ctrl-C (SIGINT) as a user would, waiting for it to end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbagent._cli", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split()[-1]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
