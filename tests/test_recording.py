"""The recording format (nbagent.recording): what is written, what never is, and reading back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from nbagent import Agent, ConfigError, RecordingFileError
from nbagent.recording import (
    FORMAT,
    VERSION,
    Recorder,
    RecordingError,
    clean_path,
    kept_headers,
    model_of,
    read_recording,
)


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _one_exchange(path: Path, **kw: object) -> None:
    rec = Recorder(path, **kw)  # type: ignore[arg-type]
    ex = rec.exchange("POST", "http://127.0.0.1:1/v1/messages", {}, b'{"model": "claude-x"}')
    ex.response(429, {"content-type": "application/json", "retry-after": "2"})
    ex.chunk(b'{"type":"error"}')
    ex.end()
    rec.close()


def test_a_recording_is_json_lines_under_a_versioned_header_and_pandas_reads_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.nbrec"
    _one_exchange(path)
    lines = _lines(path)
    assert lines[0]["kind"] == "header" and lines[0]["format"] == FORMAT
    assert lines[0]["version"] == VERSION and lines[0]["record_bodies"] is False
    assert [line["kind"] for line in lines] == ["header", "request", "response", "chunk", "end"]
    assert lines[1]["model"] == "claude-x" and lines[1]["path"] == "/v1/messages"
    assert "body" not in lines[1] and len(str(lines[1]["body_sha256"])) == 64
    frame = pd.read_json(path, lines=True)
    assert list(frame["kind"]) == ["header", "request", "response", "chunk", "end"]
    assert frame.loc[frame["kind"] == "response", "status"].item() == 429
    assert frame.loc[frame["kind"] == "chunk", "data"].item() == '{"type":"error"}'


def test_record_bodies_keeps_the_request_body(tmp_path: Path) -> None:
    path = tmp_path / "r.nbrec"
    _one_exchange(path, record_bodies=True)
    assert _lines(path)[1]["body"] == {"model": "claude-x"}
    assert read_recording(path).exchanges[0].body == {"model": "claude-x"}


def test_a_second_recorder_appends_after_the_last_exchange(tmp_path: Path) -> None:
    path = tmp_path / "r.nbrec"
    _one_exchange(path)
    _one_exchange(path)
    recording = read_recording(path)
    assert [ex.number for ex in recording.exchanges] == [1, 2]
    assert sum(line["kind"] == "header" for line in _lines(path)) == 1


def test_only_allowed_headers_and_query_parameters_reach_the_file(tmp_path: Path) -> None:
    headers = {
        "Content-Type": "text/event-stream",
        "Retry-After": "3",
        "retry-after-ms": "3000",
        "x-should-retry": "false",
        "request-id": "req_1",
        "anthropic-ratelimit-requests-remaining": "0",
        "x-ratelimit-reset-tokens": "6m0s",
        "llm_provider-retry-after": "4",
        "llm_provider-set-cookie": "session=1",
        "set-cookie": "session=1",
        "authorization": "Bearer sk-1",
        "x-api-key": "sk-1",
        "mcp-session-id": "abc",
        "x-some-new-header": "?",
    }
    assert set(kept_headers(headers)) == {
        "content-type",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "request-id",
        "anthropic-ratelimit-requests-remaining",
        "x-ratelimit-reset-tokens",
        "llm_provider-retry-after",
    }
    url = "https://g.example/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key=sk-1"
    assert clean_path(url) == "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    assert model_of(clean_path(url), b"{}") == "gemini-x"
    assert model_of("/openai/deployments/my-dep/chat/completions", None) == "my-dep"


def test_a_key_reflected_into_the_body_is_masked_even_across_a_chunk_edge(tmp_path: Path) -> None:
    key = "sk-ant-0123456789abcdefghijklmnop"
    path = tmp_path / "r.nbrec"
    rec = Recorder(path)
    ex = rec.exchange("POST", "http://h/v1/messages", {"x-api-key": key}, b"{}", secrets=[key])
    ex.response(401, {"request-id": f"req_{key}", "content-type": "application/json"})
    ex.chunk(f"invalid key {key}; and again: {key[:15]}".encode())
    ex.chunk(f"{key[15:]} end".encode())
    ex.end(error=f"boom {key}")
    rec.close()
    text = path.read_text()
    assert key not in text and key[:12] not in text and key[-12:] not in text
    assert "invalid key ***" in text


def _crashing_writer(path: Path) -> str:
    return textwrap.dedent(
        f"""
        import sys
        from nbagent.recording import Recorder
        rec = Recorder({str(path)!r})
        ex = rec.exchange("POST", "http://h/v1/messages", {{}}, b'{{"model": "m"}}')
        ex.response(200, {{"content-type": "text/event-stream"}})
        i = 0
        while True:
            ex.chunk(b"data: %d\\n\\n" % i)
            i += 1
            if i == 200:
                print("ready", flush=True)
        """
    )


@pytest.mark.e2e
def test_a_recorder_killed_mid_session_leaves_a_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "crash.nbrec"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen(
        [sys.executable, "-c", _crashing_writer(path)], stdout=subprocess.PIPE, env=env
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == b"ready"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    recording = read_recording(path)
    (ex,) = recording.exchanges
    assert ex.status == 200 and not ex.complete
    assert len(ex.chunks) >= 200
    assert [data for _, data in ex.chunks[:3]] == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.nbrec"
    _one_exchange(path)
    with open(path, "ab") as f:
        f.write(b'{"kind":"request","exchange":2,"at":1.0,"meth')
    assert len(read_recording(path)) == 1


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("a,b,c\n1,2,3\n", "is not an nbagent recording"),
        ('{"kind":"header","exchange":0,"format":"nbagent-recording","version":99}\n', "newer"),
        (
            '{"kind":"header","exchange":0,"format":"nbagent-recording","version":1}\n'
            "not json at all\n"
            '{"kind":"end","exchange":1,"after_s":0}\n',
            "line 2",
        ),
        ("", "empty"),
    ],
)
def test_a_damaged_foreign_or_newer_file_is_one_config_error_sentence(
    tmp_path: Path, content: str, words: str
) -> None:
    path = tmp_path / "bad.nbrec"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        read_recording(path)
    assert words in str(info.value)
    assert isinstance(info.value, RecordingError) and isinstance(info.value, RecordingFileError)
    assert str(info.value).count(". ") <= 1  # one sentence
    with pytest.raises(ConfigError):
        Recorder(path) if content else read_recording(tmp_path / "missing.nbrec")
    assert path.read_text() == content  # refused without touching it


def test_agent_record_to_a_folder_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot write the recording"):
        Agent("demo", record=tmp_path / "no" / "such" / "dir" / "r.nbrec")
    with pytest.raises(ConfigError, match="record= takes a path"):
        Agent("demo", record=42)  # type: ignore[arg-type]
