"""Shared helpers for the benchmarks: a mock server in its own process, timing, tables."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextmanager
def mock_process(*args: str) -> Iterator[str]:
    """`python -m nbagent.mock ARGS` in a child process (so the server does not share our GIL);
    yields its base URL and stops it afterwards."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbagent.mock", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening on" not in line:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"the mock server did not start: {line!r} {err!r}")
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def fresh_python(script: str, *args: str, root: str = ROOT) -> dict[str, Any]:
    """`python -c script ARGS` in a new process importing nbagent from `root` (this checkout
    unless given), so what a process pays once is really paid; the JSON its last line prints."""
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,  # `python -c` puts the working directory first on sys.path
        check=True,
        timeout=300,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass
class Goal:
    """One checked figure: `value` against `limit` (`value <= limit` passes)."""

    name: str
    value: float
    limit: float
    fmt: str = "{:.2f}"

    @property
    def ok(self) -> bool:
        return self.value <= self.limit

    def line(self) -> str:
        verdict = "PASS" if self.ok else "MISS"
        v, lim = self.fmt.format(self.value), self.fmt.format(self.limit)
        return f"  {verdict}  {self.name}: {v} (goal <= {lim})"


@dataclass
class Report:
    title: str
    lines: list[str] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        cells = [[str(h) for h in header], *[[_cell(c) for c in r] for r in rows]]
        widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
        for j, r in enumerate(cells):
            self.lines.append(
                "  "
                + "  ".join(
                    c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(r, widths, strict=True))
                )
            )
            if j == 0:
                self.lines.append("  " + "  ".join("-" * w for w in widths))

    def show(self) -> str:
        out = [f"== {self.title}", *self.lines, *(g.line() for g in self.goals)]
        text = "\n".join(out)
        print(text, flush=True)
        return text


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value != value:
            return "-"
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, {platform.system()}"


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.perf_counter() - self.t0
