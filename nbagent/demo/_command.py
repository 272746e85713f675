"""`nbagent demo`: the offline demo, every one of the four actions in a minute, no key needed.

It starts the loopback mock provider, runs the demo model on a few prompts under a fault script
(or random faults from a seed), prints what happens as it happens, and writes the attempt log
(`attempts.csv`), a timeline plot (`timeline.png`), a self-contained HTML report
(`report.html`) and the conversation (`session.json`) into an output folder.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .._core._retry import RetryPolicy
from .._loop._agent import Agent
from ..errors import NbAgentError
from ._console import ConsoleReporter

__all__ = ["DEMO_PLAN", "DemoStep", "run_demo"]


@dataclass(frozen=True)
class DemoStep:
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
        "COMPACT: the prompt is too long; old tool output is stubbed and the request retried",
    ),
    DemoStep(
        "One more question: what is 2 ** 10?",
        ("429:retry_after=3000",),
        "HARD FAIL: the server wants 50 minutes; that is a quota, reported as a typed error",
    ),
)


@dataclass
class DemoResult:
    out_dir: Path
    outcomes: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


async def _run_steps(
    agent: Agent,
    plan: Sequence[DemoStep],
    set_faults: object,
    out: TextIO,
    scripted: bool,
) -> list[str]:
    outcomes: list[str] = []
    try:
        for i, step in enumerate(plan, 1):
            print(f"\n▶ {i}/{len(plan)}  {step.prompt}", file=out)
            if step.teaches:
                print(f"  ({step.teaches})", file=out)
            if scripted and callable(set_faults):
                set_faults(list(step.faults))
            try:
                result = await agent.run(step.prompt, show=False)
            except NbAgentError as exc:
                print(f"  ✗ {type(exc).__name__}: {exc}", file=out)
                print("    the conversation is as it was before this step", file=out)
                outcomes.append(type(exc).__name__)
            else:
                text = " ".join(result.final_text.split())
                print(f"  ✓ {text[:300]}{'…' if len(text) > 300 else ''}", file=out)
                outcomes.append(result.end_reason)
    finally:
        await agent.aclose()  # its connections belong to this event loop, which ends now
    return outcomes


def run_demo(
    out_dir: str | os.PathLike[str] = "nbagent-demo",
    *,
    seed: int = 7,
    faults: Sequence[str] | None = None,
    fault_rate: float = 0.0,
    model: str = "demo",
    stream: TextIO | None = None,
) -> DemoResult:
    """Run the demo and write its files. Returns where they went and how each prompt ended."""
    from ..analysis import plot_timeline
    from ..mock import serve
    from ..notebook._export import export_html
    from ._tools import calculator, file_tools

    out = stream or sys.stdout
    target = Path(out_dir)
    target.mkdir(parents=True, exist_ok=True)
    reporter = ConsoleReporter(out)
    policy = RetryPolicy(seed=seed)
    tools = [calculator, *file_tools()]
    real = model != "demo"
    rates = None
    if fault_rate > 0:
        share = fault_rate / 4
        rates = {
            "500": share,
            "429:retry_after=0.5": share,
            "drop_after_tokens=3": share,
            "529": share,
        }

    def finish(agent: Agent, outcomes: list[str]) -> DemoResult:
        result = DemoResult(target, outcomes)
        frame = agent.attempts
        csv = target / "attempts.csv"
        frame.to_csv(csv, index=False)
        fig = plot_timeline(frame, title="nbagent demo: every attempt, wait and tool call")
        png = target / "timeline.png"
        fig.savefig(png, dpi=110, bbox_inches="tight")
        html = target / "report.html"
        export_html(reporter.state.snapshot(), html, title="nbagent demo")
        session = target / "session.json"
        agent.save(session)
        result.files = [csv, png, html, session]
        return result

    if real:
        agent = Agent(model, tools=tools, retry=policy, subscribers=[reporter])
        print(f"nbagent demo with {model} (no fault injection on a real provider)", file=out)
        plan = [DemoStep(s.prompt.replace("[demo:unknown_tool] ", "")) for s in DEMO_PLAN[:4]]
        outcomes = asyncio.run(_run_steps(agent, plan, None, out, scripted=False))
        return finish(agent, outcomes)

    with serve(faults=list(faults or ()), seed=seed, fault_rates=rates) as server:
        agent = Agent(
            "demo", base_url=server.url, tools=tools, retry=policy, subscribers=[reporter]
        )
        print(f"nbagent demo: the demo model on a loopback server at {server.url}", file=out)
        print("no key, no internet; faults are injected by the server", file=out)
        scripted = faults is None and rates is None
        outcomes = asyncio.run(_run_steps(agent, DEMO_PLAN, server.set_faults, out, scripted))
        result = finish(agent, outcomes)
    print("\nwrote:", file=out)
    for f in result.files:
        print(f"  {f}", file=out)
    return result
