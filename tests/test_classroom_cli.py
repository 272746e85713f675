"""`nbagent classroom`: what it prints, where it listens, and one sentence for each mistake."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest

from nbagent._cli import main

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (["--capacity", "lots"], "--capacity must be a positive number of requests per second"),
        (["--capacity", "0"], "--capacity must be a positive number"),
        (["--port", "99999"], "--port must be a port number from 0 to 65535"),
        (["--port", "-1"], "--port must be a port number"),
        (["--simulate", "x"], "--simulate must be a whole number of students"),
        (["--max-students", "0"], "--max-students must be a whole number, 1 or more"),
        (["--seed", "1.5"], "--seed must be a whole number"),
        (["--refusal", "418"], "--refusal"),
        (["--frobnicate"], "unrecognized arguments"),
        (["--host", "256.1.1.1"], "cannot listen on 256.1.1.1:0"),
    ],
)
def test_a_mistake_is_one_sentence_and_exit_code_2(
    argv: list[str], sentence: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["classroom", *argv]) == 2
    err = capsys.readouterr().err
    assert sentence in err
    assert err.startswith("nbagent classroom: ") and "Traceback" not in err
    assert err.count("\n") == 1


def test_it_prints_the_join_line_and_the_dashboard_and_says_it_is_local() -> None:
    run = "import sys; from nbagent._cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", run, "classroom", "--capacity", "4", "--simulate", "2"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            lines = []
            while not lines or not lines[-1].startswith("Ctrl-C"):
                line = proc.stdout.readline()
                assert line, proc.stderr.read()
                lines.append(line.strip())
            text = "\n".join(lines)
            assert "Listening on 127.0.0.1 only" in text
            assert "2 virtual students have joined." in text
            join_line = next(
                line for line in lines if line.startswith("seat = nbagent.classroom.join(")
            )
            url = join_line.split('"')[1]
            code = join_line.split('code="')[1].split('"')[0]
            dashboard = text.split("keep this link to yourself): ")[1].split()[0]
            assert dashboard.startswith(url + "/classroom?token=")
            assert httpx.get(dashboard).status_code == 200
            reply = httpx.post(
                url + "/classroom/join", json={"name": "ana"}, headers={"x-api-key": code}
            )
            assert reply.json()["seat"] == 3  # after the two virtual students
            proc.send_signal(signal.SIGINT)  # Ctrl-C
            assert proc.wait(30) == 0
            assert proc.stderr.read() == "The room is closed.\n"
        finally:
            if proc.poll() is None:
                proc.kill()


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classroom", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--host", "--port", "--capacity", "--simulate", "--seed", "--max-students"):
        assert option in out
