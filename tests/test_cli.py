"""`nbagent demo` and `nbagent serve`: what a newcomer runs first."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from nbagent._cli import main
from nbagent.demo._command import run_demo

pytestmark = pytest.mark.e2e


def test_demo_shows_all_four_actions_and_writes_its_files(tmp_path: Path) -> None:
    out = io.StringIO()
    result = run_demo(tmp_path / "demo", stream=out)
    text = out.getvalue()
    # RETRY, with the server's wish and with backoff, and a broken stream discarded
    assert "rate limit: server asked to wait 1.0s (attempt 2/4)" in text
    assert "provider unavailable: retrying in" in text
    assert "stream interrupted: retrying in" in text
    # TOOL RESULT: an unknown tool and a failing handler, read by the model
    assert "tool delete_everything → error result: Unknown tool `delete_everything`" in text
    assert "file not found: secrets/plan.txt" in text
    # COMPACT, then HARD FAIL with the quota sentence
    assert "compacted:" in text
    assert "✗ QuotaExceeded: Demo model rate limit reached. Resets in 50 min." in text
    assert result.outcomes == ["end_turn"] * 5 + ["QuotaExceeded"]

    files = {p.name for p in result.files}
    assert files == {"attempts.csv", "timeline.png", "report.html", "session.json"}
    frame = pd.read_csv(tmp_path / "demo" / "attempts.csv")
    assert {"retry", "compact", "tool_result", "fail"} <= set(frame["action"])
    assert (tmp_path / "demo" / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "demo" / "report.html").read_text()
    assert "http://" not in html and "https://" not in html  # self-contained
    session = json.loads((tmp_path / "demo" / "session.json").read_text())
    assert session["format"] == 1 and session["messages"]


def test_demo_with_a_custom_fault_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--out", str(tmp_path / "d"), "--faults", "500,ok", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert text.count("provider unavailable: retrying in") == 1
    assert "wrote:" in text


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["demo", "--faults", "teapot"], 2, "teapot"),
        (["demo", "--model", "gpt-4"], 2, "model"),
        (["frobnicate"], 2, "unknown command 'frobnicate'"),
        ([], 2, "usage: nbagent"),
    ],
)
def test_cli_mistakes_get_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    if argv[:1] == ["demo"]:
        argv = [*argv, "--out", str(tmp_path / "x")]
    assert main(argv) == code
    captured = capsys.readouterr()
    assert message in captured.out + captured.err
