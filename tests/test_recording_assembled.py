"""The recordings shipped for the notebooks and `nbagent demo --replay`: what the assembler
makes, honest about being assembled, and replayable."""

from __future__ import annotations

import asyncio
import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest

from nbagent import Agent, QuotaExceeded, RetryPolicy, VirtualClock
from nbagent._cli import main
from nbagent.demo._replay import RECORDINGS, replay_provider, shipped_recordings
from nbagent.recording import read_recording
from nbagent.simulate import server_model

ROOT = Path(__file__).resolve().parents[1]


def _assembler() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "assemble_recordings", ROOT / "scripts" / "assemble_recordings.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_recordings_are_what_the_assembler_makes(tmp_path: Path) -> None:
    made = _assembler().build(tmp_path)
    assert sorted(p.name for p in made) == sorted(p.name for p in RECORDINGS.glob("*.nbrec"))
    for path in made:
        assert path.read_bytes() == (RECORDINGS / path.name).read_bytes(), path.name


@pytest.mark.parametrize("name", ["gemini-free-tier", "anthropic-overload-storm"])
def test_each_shipped_recording_says_it_was_assembled_and_from_what(name: str) -> None:
    header = read_recording(shipped_recordings()[name]).header
    assert header["assembled"] is True
    assert str(header["note"]).startswith("ASSEMBLED, not one real session")
    assert header["sources"] and all("/" in s for s in header["sources"])


def test_the_gemini_free_tier_shows_per_minute_429s_then_the_daily_quota() -> None:
    model = server_model(shipped_recordings()["gemini-free-tier"])
    kinds = [type(a.error).__name__ if a.error else "ok" for a in model.answers]
    assert kinds.count("ok") == 20 and kinds[-1] == "QuotaExceeded"
    assert kinds.count("RateLimited") >= 3 and "Overloaded" in kinds
    assert all(a.error.retry_after == 58 for a in model.answers if a.rate_limited and a.error)
    assert model.bucket is not None and model.bucket.capacity == 5


@pytest.mark.e2e
def test_the_gemini_recording_replays_to_twenty_answers_and_a_hard_quota_failure() -> None:
    path = shipped_recordings()["gemini-free-tier"]
    requests = len(server_model(path).requests)

    async def main() -> tuple[int, list[BaseException]]:
        provider = replay_provider(str(path), speed=math.inf)
        agent = Agent(
            provider, clock=VirtualClock(), limiter=False, retry=RetryPolicy(max_attempts=5)
        )
        failures: list[BaseException] = []
        answered = 0
        async with agent:
            for i in range(requests):
                try:
                    await agent.run(f"question {i}", show=False)
                    answered += 1
                except QuotaExceeded as exc:
                    failures.append(exc)
        return answered, failures

    answered, failures = asyncio.run(main())
    assert answered == 20
    (quota,) = failures
    assert "daily quota" in str(quota) and "20 requests a day" in str(quota)


@pytest.mark.e2e
def test_nbagent_demo_replay_runs_a_shipped_storm_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["demo", "--replay", "anthropic-overload-storm", "--speed", "8", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "ASSEMBLED, not one real session" in captured.out
    assert "provider overloaded: retrying" in captured.out
    assert captured.out.count("✓ Hello there!") == 3
    assert (out / "attempts.csv").is_file() and (out / "timeline.png").is_file()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--replay", "no-such-storm"], "no recording 'no-such-storm'"),
        (
            ["--replay", "anthropic-overload-storm", "--model", "openai:gpt-4o"],
            "cannot be combined",
        ),
        (["--replay", "anthropic-overload-storm", "--speed", "0"], "--speed"),
    ],
)
def test_nbagent_demo_replay_mistakes_are_one_sentence_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    code = main(["demo", *argv, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
