"""`nbagent demo` and `nbagent serve`: what a newcomer runs first, often typed carelessly.

Every mistake is one sentence on stderr and exit code 2 (never a traceback), a failed demo
leaves no folder behind, Ctrl-C is one line and exit code 130 with the finished steps written,
and both commands read fault scripts the same way.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from mock_support import serve_process

import nbagent
from nbagent._cli import main
from nbagent.demo._command import DEMO_PLAN, run_demo
from nbagent.mock._cli import split_faults

ROOT = Path(__file__).resolve().parent.parent

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
    # run 2 quotes notes.txt cut at a word, never inside one
    quote = "“The provider answered 429 three times this morning; Retry-After said 2 seconds …”"
    assert quote in text
    assert "✗ QuotaExceeded: Demo model rate limit reached. Resets in 50 min." in text
    assert result.outcomes == ["end_turn"] * 5 + ["QuotaExceeded"]

    files = {p.name for p in result.files}
    assert files == {"attempts.csv", "timeline.png", "report.html", "session.json"}
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]  # no staging folder left over
    frame = pd.read_csv(tmp_path / "demo" / "attempts.csv")
    assert {"retry", "compact", "tool_result", "fail"} <= set(frame["action"])
    # the injected overflow says its numbers are made up (the prompt is a few hundred tokens)
    (said,) = frame.loc[frame["action"] == "compact", "message"]
    assert "prompt is too long: " in said
    assert "(simulated: an injected fault, not the prompt's size)" in said
    assert (tmp_path / "demo" / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "demo" / "report.html").read_text()
    assert "http://" not in html and "https://" not in html  # self-contained
    session = json.loads((tmp_path / "demo" / "session.json").read_text())
    assert session["format"] == 1 and session["messages"]

    # The report's headline is the whole session, not its last step; each run is still listed.
    state = json.loads(
        re.search(r'id="nbagent-state">\n(.*?)\n</script>', html, re.S).group(1)  # type: ignore[union-attr]
    )
    headline = state["session"]
    assert headline["runs"] == 6 and headline["runs_failed"] == 1
    assert headline["attempts"] == int((frame["phase"] != "tool").sum())
    assert headline["retries"] == int((frame["action"] == "retry").sum()) == 3
    assert headline["retry_after_waits"] == 1 and headline["backoff_waits"] == 2
    assert headline["tool_errors"] == 2 and headline["compactions"] == 1
    assert headline["last_error"] == "QuotaExceeded"
    cue = "[demo:unknown_tool] "
    assert [run["prompt"] for run in state["runs"]] == [
        step.prompt.replace(cue, "") for step in DEMO_PLAN
    ]
    assert all(run["summary"] for run in state["runs"])
    # without JavaScript the page says the same
    assert "session of 6 runs" in html and "ended with</small><br><b>QuotaExceeded" in html
    # each run's line counts its nouns: run 6 made one attempt, run 2 one retry
    assert "QuotaExceeded</b>, 1 attempt, 0 retries</li>" in html
    assert "3 attempts, 1 retry</li>" in html and "1 attempts" not in html

    # The demo model's cue reaches the model (it called the unknown tool above), but no reader
    # sees it: not the terminal, the report's table, timeline or conversation.
    assert "[demo:" not in text and "[demo:" not in html
    assert "▶ 3/6  Tidy up the data folder for me." in text
    # How the session went heads the report: five of six succeeded, the sixth failed as planned
    planned = "5 of 6 runs succeeded; run 6 ended with QuotaExceeded, as the fault script planned"
    assert state["status"].startswith(planned) and state["status_kind"] == "done"
    assert planned in text
    # a row per prompt in the report's timeline, and each run's note beside its prompt
    assert state["lanes_by"] == "run"
    assert [run.get("note") for run in state["runs"]] == [step.teaches for step in DEMO_PLAN]
    # the compaction is told in the same words by the note, the terminal and the report
    assert "stubbed, older turns are summarised" in DEMO_PLAN[4].teaches
    assert "summarising older turns with demo" in text
    notes = [e["text"] for e in state["conversation"] if e["kind"] == "note"]
    assert any("(old tool output stubbed, older turns summarised)" in n for n in notes), notes


@pytest.mark.parametrize("faults", [["500,ok"], ["500", "ok"], ["500 ok"]])
def test_demo_with_a_custom_fault_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], faults: list[str]
) -> None:
    argv = ["demo", "--out", str(tmp_path / "d"), "--faults", *faults, "--seed", "3"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.count("provider unavailable: retrying in") == 1
    assert "wrote:" in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    # the name `pip install` takes (the module is `nbagent`, the name on the index is not)
    assert capsys.readouterr().out == f"nbagent-loop {nbagent.__version__}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--out", "{file}"], "is a file; give a folder"),
        (["demo", "--out", "{file}/inside"], "cannot write the demo to"),
        (["demo", "--seed", "abc"], "--seed must be a whole number, not 'abc'"),
        (["demo", "--fault-rate", "1.5"], "--fault-rate must be a share of requests between 0"),
        (["demo", "--fault-rate", "lots"], "--fault-rate must be a share"),
        (["demo", "--faults", "teapot"], "--faults: Fault 'teapot' has unknown kind"),
        (["demo", "--faults", "429:retry_after=soon"], "retry_after must be a number"),
        (["demo", "--model", "gpt-4"], "no provider prefix"),
        (["demo", "--out"], "--out expected one argument"),
        (["demo", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["serve", "--faults", "teapot,500"], "Fault 'teapot' has unknown kind"),
        (["frobnicate"], "unknown command 'frobnicate'"),
    ],
)
def test_every_mistake_is_one_sentence_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("not a folder")
    argv = [a.replace("{file}", str(afile)) for a in argv]
    if argv[:1] == ["demo"] and "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert message in lines[0]
    assert lines[0].endswith(".")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no folder left behind


def test_a_mistake_in_a_real_process_shows_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "nbagent._cli", "demo", "--out", str(tmp_path / "taken")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"nbagent demo: --out {tmp_path / 'taken'} is a file; give a folder to write the demo into."
    ]


def demo_process(out: Path, *faults: str) -> subprocess.Popen[str]:
    """`nbagent demo` in a process of its own, where SIGINT is Ctrl-C (never inherited as
    ignored, as it is under a shell's background job)."""
    return subprocess.Popen(
        [sys.executable, "-m", "nbagent._cli", "demo", "--out", str(out), "--faults", *faults],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def interrupt_while_waiting(proc: subprocess.Popen[str]) -> tuple[str, str]:
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "server asked to wait 30.0s" in line:
            break
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    return "".join(seen) + rest, err


def test_ctrl_c_is_one_line_exit_130_and_the_finished_steps_are_written(tmp_path: Path) -> None:
    # step 1 succeeds; step 2 waits for a 30 s Retry-After, and Ctrl-C comes during that wait
    out = tmp_path / "demo"
    proc = demo_process(out, "ok,ok", "429:retry_after=30")
    stdout, stderr = interrupt_while_waiting(proc)
    assert proc.returncode == 130, stderr
    assert stderr == f"nbagent demo: interrupted; the 1 finished step is in {out}\n"
    assert "Traceback" not in stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no half-written folder
    assert sorted(p.name for p in out.iterdir()) == [
        "attempts.csv",
        "report.html",
        "session.json",
        "timeline.png",
    ]
    frame = pd.read_csv(out / "attempts.csv")
    first = frame[frame["run_id"] == frame["run_id"].iloc[0]]
    assert list(first["outcome"]) == ["ok", "ok", "ok"]  # request, calculator, answer
    messages = json.loads((out / "session.json").read_text())["messages"]
    assert messages[0]["content"][0]["text"] == "What is 17 * 23 + 4?"
    assert len(messages) == 4  # the interrupted step left the conversation as it was


def test_ctrl_c_before_any_step_finished_leaves_no_folder(tmp_path: Path) -> None:
    proc = demo_process(tmp_path / "demo", "429:retry_after=30")
    _, stderr = interrupt_while_waiting(proc)
    assert proc.returncode == 130
    assert stderr == "nbagent demo: interrupted before a step finished; nothing written\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("texts", "entries"),
    [
        (["429:retry_after=2,500,ok"], ["429:retry_after=2", "500", "ok"]),
        (["429:retry_after=2", "500", "ok"], ["429:retry_after=2", "500", "ok"]),
        (["429:retry_after=2 500; ok"], ["429:retry_after=2", "500", "ok"]),
        (
            ["429:retry_after=1,should_retry=false,503"],
            ["429:retry_after=1,should_retry=false", "503"],
        ),
    ],
)
def test_one_fault_syntax(texts: list[str], entries: list[str]) -> None:
    assert split_faults(texts) == entries


def test_serve_reads_the_same_fault_script_as_demo() -> None:
    # commas, as `nbagent demo --faults` takes them: the first request gets the 503
    with serve_process("--faults", "503,ok") as url:
        assert url.startswith("http://127.0.0.1:")
        body = json.dumps(
            {"model": "demo", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        request = urllib.request.Request(
            f"{url}/v1/messages", data=body, headers={"content-type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(request, timeout=10)
        assert failed.value.code == 503
        failed.value.close()
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
