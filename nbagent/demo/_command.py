"""`nbagent demo`: the offline demo, every one of the four actions in a minute, no key needed.

It starts the loopback mock provider, runs the demo model on a few prompts under a fault script
(or random faults from a seed), prints what happens as it happens, and writes the attempt log
(`attempts.csv`), a timeline plot (`timeline.png`), a self-contained HTML report
(`report.html`, headed by the whole session's numbers) and the conversation (`session.json`)
into an output folder.

The folder is written all at once or not at all: the files are made in a hidden staging folder
next to it, created before the first prompt (so an unwritable `--out` is reported at once, not
after a minute of demo), and moved into place when complete. A failed demo leaves no folder
behind; an interrupted one (Ctrl-C) writes the steps that had finished.
"""

from __future__ import annotations

import asyncio
import copy
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .._core._numbers import is_positive
from .._core._retry import RetryPolicy
from .._loop._agent import Agent
from ..errors import Aborted, ConfigError, NbAgentError
from ._console import ConsoleReporter
from ._structured import MARKER

FILES = ("attempts.csv", "timeline.png", "report.html", "session.json")


@dataclass(frozen=True)
class DemoStep:
    """One prompt of `nbagent demo`, the faults its requests meet, and what it teaches.

    Attributes:
        prompt: The prompt (its `[demo:...]` cue steers the demo model).
        faults: The faults its requests meet, in the mock server's fault syntax.
        teaches: What the step shows, one sentence for the report.
    """

    prompt: str
    faults: tuple[str, ...] = ()
    teaches: str = ""


DEMO_PLAN: tuple[DemoStep, ...] = (
    DemoStep(
        "What is 17 * 23 + 4?",
        ("429:retry_after=1", "503"),
        "RETRY: a 429 with Retry-After, then a 503 with backoff, then a calculator call",
    ),
    DemoStep(
        "Read the file notes.txt and tell me what it says.",
        ("ok", "drop_after_tokens=4"),
        "RETRY: the stream breaks off mid-reply; the partial text is discarded, never kept",
    ),
    DemoStep(
        "[demo:unknown_tool] Tidy up the data folder for me.",
        (),
        "TOOL RESULT: the model calls a tool that does not exist, reads the error, recovers",
    ),
    DemoStep(
        "Read the file secrets/plan.txt please.",
        (),
        "TOOL RESULT: the tool raises (file not found); the model explains instead",
    ),
    DemoStep(
        "Summarize our conversation so far.",
        ("overflow",),
        "COMPACT: the server says the prompt is too long (a simulated overflow: the numbers in "
        "its error are made up); old tool output is stubbed, older turns are summarised by the "
        "model, and the request is retried",
    ),
    DemoStep(
        "One more question: what is 2 ** 10?",
        ("429:retry_after=3000",),
        "HARD FAIL: the server wants 50 minutes; that is a quota, reported as a typed error",
    ),
)
"""The built-in demo: one step per action, so a single run shows all four."""


@dataclass
class DemoResult:
    out_dir: Path
    outcomes: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    interrupted: bool = False
    failed_steps: list[int] = field(default_factory=list)  # 1-based, as the terminal numbers them


class DemoInterrupted(Exception):
    """Ctrl-C: `result` holds the steps that finished (and the files written for them)."""

    def __init__(self, result: DemoResult) -> None:
        super().__init__("the demo was interrupted")
        self.result = result


def _hidden_folder(parent: Path, name: str) -> Path:
    """A new empty folder `.name.<random>` in `parent`, with the usual permissions (umask),
    unlike `tempfile.mkdtemp`'s private 0700: it becomes the user's output folder."""
    while True:
        path = parent / f".{name}.{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path


class _Staging:
    """A hidden folder beside `--out` where the files are made; moved into place when done."""

    def __init__(self, target: Path) -> None:
        if target.exists() and not target.is_dir():
            raise ConfigError(f"--out {target} is a file; give a folder to write the demo into.")
        anchor = target.parent
        while not anchor.exists() and anchor != anchor.parent:
            anchor = anchor.parent
        try:
            self.path = _hidden_folder(anchor, target.name)
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise ConfigError(f"cannot write the demo to {target}: {why} ({anchor}).") from None
        self.target = target

    def publish(self) -> list[Path]:
        """Move the finished files into `target` (a new folder appears complete, in one go)."""
        if not self.target.exists():
            self.target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.path, self.target)
        else:
            for name in FILES:
                os.replace(self.path / name, self.target / name)
        return [self.target / name for name in FILES]

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _planned(step: DemoStep) -> str:
    """Why a step of the built-in script fails on purpose ("" for one meant to succeed)."""
    head, _, why = step.teaches.partition(":")
    return why.strip() if head.strip().upper() == "HARD FAIL" else ""


def _session_line(plan: Sequence[DemoStep], result: DemoResult, scripted: bool) -> str:
    """How the session went, in a sentence: "5 of 6 runs succeeded; run 6 ended with
    QuotaExceeded, as the fault script planned: …"."""
    runs = len(result.outcomes)
    line = f"{runs - len(result.failed_steps)} of {runs} runs succeeded"
    for i in result.failed_steps:
        why = _planned(plan[i - 1]) if scripted and i <= len(plan) else ""
        line += f"; run {i} ended with {result.outcomes[i - 1]}"
        line += f", as the fault script planned: {why}" if why else ""
    return line


def _for_readers(
    snapshot: dict[str, object], plan: Sequence[DemoStep], result: DemoResult, scripted: bool
) -> dict[str, object]:
    """The report's state: a row per prompt, the cues left out, each run's note, and the
    session's outcome as its status line (a planned failure is not the report's headline)."""
    state = copy.deepcopy(snapshot)
    runs = state.get("runs")
    for i, run in enumerate(runs if isinstance(runs, list) else []):
        run["prompt"] = MARKER.sub("", str(run.get("prompt") or ""))
        if scripted and i < len(plan) and plan[i].teaches:
            run["note"] = plan[i].teaches
    talk = state.get("conversation")
    for entry in talk if isinstance(talk, list) else []:
        if entry.get("kind") == "message" and entry.get("role") == "user":
            for block in entry.get("blocks") or []:
                if block.get("type") == "text":
                    block["text"] = MARKER.sub("", str(block.get("text") or ""))
    planned = all(_planned(plan[i - 1]) for i in result.failed_steps if i <= len(plan))
    state["status"] = _session_line(plan, result, scripted)
    state["status_kind"] = "done" if not result.failed_steps or (scripted and planned) else "error"
    state["lanes_by"] = "run"  # timeline.js: a row per prompt, as timeline.png draws them
    return state


def _write(
    staging: _Staging,
    agent: Agent,
    reporter: ConsoleReporter,
    plan: Sequence[DemoStep],
    result: DemoResult,
    scripted: bool,
) -> None:
    from ..analysis import plot_timeline
    from ..notebook._export import export_html

    snapshot = _for_readers(reporter.state.snapshot(), plan, result, scripted)
    frame = agent.attempts
    frame.to_csv(staging.path / "attempts.csv", index=False)
    runs = snapshot["runs"]
    prompts = {run["run_id"]: run["prompt"] for run in runs} if isinstance(runs, list) else {}
    fig = plot_timeline(
        frame, labels=prompts, title="nbagent demo: every attempt, wait and tool call"
    )
    fig.savefig(staging.path / "timeline.png", dpi=110, bbox_inches="tight")
    export_html(snapshot, staging.path / "report.html", title="nbagent demo")
    agent.save(staging.path / "session.json")


def run_demo(
    out_dir: str | os.PathLike[str] = "nbagent-demo",
    *,
    seed: int = 7,
    faults: Sequence[str] | None = None,
    fault_rate: float = 0.0,
    model: str = "demo",
    stream: TextIO | None = None,
    replay: str | None = None,
    speed: float = 1.0,
) -> DemoResult:
    """Run the demo and write its files. Returns where they went and how each prompt ended.

    Raises `ConfigError` (one sentence) for a bad `--out`, fault script or model, before any
    prompt is sent, and `DemoInterrupted` on Ctrl-C once the finished steps are written.

    Args:
        out_dir: The folder for the files (attempts.csv, timeline.png, report.html, session.json).
        seed: Seeds the retry jitter and the random faults, so a demo repeats.
        faults: A fault script for the mock server ("429:retry_after=1", "503", ...); None for the
            plan's own.
        fault_rate: The chance of a random fault per request, besides the script.
        model: "demo" (offline, faults injected), or a real model string (no faults).
        stream: Where the progress goes; None for stdout.
        replay: A recording (path or shipped name) to replay instead of the plan.
        speed: How much faster than recorded a replay runs.

    Returns:
        Where the files went and how each prompt ended.

    Raises:
        ConfigError: A bad output folder, fault script or model, before any prompt is sent.
        DemoInterrupted: Ctrl-C; the finished steps' files are written first.
    """
    from ..mock import parse_faults, serve
    from ._tools import calculator, file_tools

    out = stream or sys.stdout
    try:
        parse_faults(list(faults or ()))
    except ValueError as exc:
        raise ConfigError(f"--faults: {exc}") from None
    staging = _Staging(Path(out_dir))
    result = DemoResult(Path(out_dir))
    try:
        reporter = ConsoleReporter(out)
        policy = RetryPolicy(seed=seed)
        tools = [calculator, *file_tools()]
        plan: Sequence[DemoStep] = DEMO_PLAN
        scripted = False
        if replay is not None:
            agent, plan = _replay_steps(replay, speed, seed, reporter, out, result)
        elif model != "demo":
            agent = Agent(model, tools=tools, retry=policy, subscribers=[reporter])
            print(f"nbagent demo with {model} (no fault injection on a real provider)", file=out)
            plan = [DemoStep(MARKER.sub("", s.prompt)) for s in DEMO_PLAN[:4]]
            _steps(agent, plan, out, result)
        else:
            rates = _random_faults(fault_rate)
            with serve(faults=list(faults or ()), seed=seed, fault_rates=rates) as server:
                agent = Agent(
                    "demo", base_url=server.url, tools=tools, retry=policy, subscribers=[reporter]
                )
                print(
                    f"nbagent demo: the demo model on a loopback server at {server.url}", file=out
                )
                print("no key, no internet; faults are injected by the server", file=out)
                scripted = faults is None and rates is None
                _steps(agent, DEMO_PLAN, out, result, server.set_faults if scripted else None)
        if result.outcomes:
            print(f"\n{_session_line(plan, result, scripted)}", file=out)
            _write(staging, agent, reporter, plan, result, scripted)
            result.files = staging.publish()
    finally:
        staging.discard()
    if result.interrupted:
        raise DemoInterrupted(result)
    print("\nwrote:", file=out)
    for f in result.files:
        print(f"  {f}", file=out)
    return result


def _replay_steps(
    name: str, speed: float, seed: int, reporter: ConsoleReporter, out: TextIO, result: DemoResult
) -> tuple[Agent, list[DemoStep]]:
    """`--replay NAME`: as many prompts as the recording holds requests, answered by it; the
    agent's own waits take no time (a virtual clock), the answers come at `speed`."""
    from .._core._clock import VirtualClock
    from ..recording import read_recording
    from ..simulate import server_model
    from ._replay import recording_path, replay_provider

    if not is_positive(speed):
        raise ConfigError(f"--speed must be a positive number, not {speed!r}.")
    path = recording_path(name)
    recording = read_recording(path)
    requests = len(server_model(recording).requests)
    provider = replay_provider(str(path), speed=speed)
    agent = Agent(
        provider,
        retry=RetryPolicy(max_attempts=10, seed=seed),
        clock=VirtualClock(),
        limiter=False,
        subscribers=[reporter],
    )
    print(
        f"nbagent demo: replaying {path.name} ({len(recording)} answers) at speed {speed:g}",
        file=out,
    )
    note = str(recording.header.get("note") or "")
    if note:
        print(f"  {note}", file=out)
    print("the agent's own waits run on a virtual clock: they take no time here", file=out)
    plan = [DemoStep(f"Request {i} of the recording.") for i in range(1, requests + 1)]
    _steps(agent, plan, out, result)
    return agent, plan


def _random_faults(fault_rate: float) -> dict[str, float] | None:
    """`--fault-rate`: that share of requests fails, spread evenly over four retryable faults."""
    if fault_rate <= 0:
        return None
    share = fault_rate / 4
    return {"500": share, "429:retry_after=0.5": share, "drop_after_tokens=3": share, "529": share}


def _steps(
    agent: Agent,
    plan: Sequence[DemoStep],
    out: TextIO,
    demo: DemoResult,
    set_faults: Callable[[list[str]], None] | None = None,
) -> None:
    """Run the plan in an event loop of its own, appending how each step ended to `demo`
    (kept when interrupted); Ctrl-C ends it and is remembered."""

    async def run_steps() -> None:
        outcomes = demo.outcomes
        try:
            for i, step in enumerate(plan, 1):
                # the demo model's cue ("[demo:unknown_tool]") is for the model, not the reader
                print(f"\n▶ {i}/{len(plan)}  {MARKER.sub('', step.prompt)}", file=out)
                if step.teaches:
                    print(f"  ({step.teaches})", file=out)
                if set_faults is not None:  # the plan's own fault script
                    set_faults(list(step.faults))
                try:
                    result = await agent.run(step.prompt, show=False)
                except Aborted:
                    raise  # Ctrl-C: the demo stops here, it does not go on to the next step
                except NbAgentError as exc:
                    print(f"  ✗ {type(exc).__name__}: {exc}", file=out)
                    print("    the conversation is as it was before this step", file=out)
                    outcomes.append(type(exc).__name__)
                    demo.failed_steps.append(i)
                else:
                    text = " ".join(result.final_text.split())
                    print(f"  ✓ {text[:300]}{'…' if len(text) > 300 else ''}", file=out)
                    outcomes.append(result.end_reason)
        finally:
            await agent.aclose()  # its connections belong to this event loop, which ends now

    try:
        asyncio.run(run_steps())
    except (KeyboardInterrupt, Aborted):
        demo.interrupted = True
