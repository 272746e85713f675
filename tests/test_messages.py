from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nbagent import errors as E
from nbagent._core._messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    load_session,
    repair_tool_pairing,
    save_session,
)


def conversation() -> list[Message]:
    return [
        Message.user("read notes.txt"),
        Message(
            "assistant",
            (
                ThinkingBlock("the user wants a file", "sig-abc"),
                TextBlock("Reading it."),
                ToolUseBlock("t1", "read_file", {"path": "notes.txt"}),
                ToolUseBlock("t2", "read_file", {}, raw_input='{"path": "no'),
            ),
        ),
        Message(
            "user",
            (
                ToolResultBlock("t1", (TextBlock("hello"), ImageBlock("iVBOR", "image/png"))),
                ToolResultBlock("t2", (TextBlock("bad json"),), is_error=True),
            ),
        ),
        Message.assistant("It says hello."),
    ]


def test_session_round_trip_keeps_every_block(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_session(path, conversation(), {"note": "x"})
    messages, meta = load_session(path)
    assert messages == conversation()
    assert meta == {"note": "x"}
    assert json.loads(path.read_text())["format"] == 1


def test_old_file_without_is_error_loads_with_false(tmp_path: Path) -> None:
    old = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "content": [{"type": "text", "text": "ok"}],
                }
            ],
        },
    ]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    messages, _ = load_session(path)
    assert messages[2].tool_results[0].is_error is False
    assert messages[0].text == "hi"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "not valid JSON (line 1"),
        (b"\xff\xfe", "not UTF-8"),
        (b'"just a string"', "top level must be an object"),
        (b'{"format": 1}', "'messages' is missing"),
        (b'{"format": 99, "messages": []}', "newer than this nbagent reads"),
        (b'{"format": 1, "messages": [{"role": "robot", "content": []}]}', "message 0: unknown"),
        (
            b'{"format": 1, "messages": [{"role": "user", "content": [{"type": "video"}]}]}',
            "unknown content block type 'video'",
        ),
        (
            b'{"format": 1, "messages": [{"role": "user", "content": [{"type": "tool_result", '
            b'"tool_use_id": "x", "is_error": "yes"}]}]}',
            "is_error must be true or false",
        ),
    ],
)
def test_corrupt_file_raises_a_clear_error_naming_file_and_problem(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    with pytest.raises(E.SessionFileError) as info:
        load_session(path)
    assert str(path) in str(info.value)
    assert problem in str(info.value)


def test_missing_file_is_a_session_file_error(tmp_path: Path) -> None:
    with pytest.raises(E.SessionFileError, match="No such file"):
        load_session(tmp_path / "nope.json")


def test_a_crash_mid_save_leaves_the_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.json"
    save_session(path, conversation())
    before = path.read_bytes()

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        save_session(path, [Message.user("new")])
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temp file left behind


def test_unanswered_tool_use_is_repaired_or_refused() -> None:
    broken = [
        Message.user("go"),
        Message("assistant", (ToolUseBlock("a", "f", {}), ToolUseBlock("b", "g", {}))),
        Message("user", (ToolResultBlock("a", (TextBlock("ok"),)),)),
        Message("assistant", (ToolUseBlock("c", "h", {}),)),
    ]
    fixed = repair_tool_pairing(broken)
    assert [r.tool_use_id for r in fixed[2].tool_results] == ["b", "a"]
    assert fixed[2].tool_results[0].is_error
    assert fixed[-1].role == "user" and fixed[-1].tool_results[0].tool_use_id == "c"
    with pytest.raises(E.ToolPairingError, match=r"g \(b\)"):
        repair_tool_pairing(broken, strict=True)


def test_load_repairs_pairing_unless_strict(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_session(path, [Message.user("go"), Message("assistant", (ToolUseBlock("a", "f", {}),))])
    messages, _ = load_session(path)
    assert messages[-1].tool_results[0].is_error
    with pytest.raises(E.ToolPairingError):
        load_session(path, strict_tool_pairing=True)


def test_provider_state_blocks_survive_a_session_file(tmp_path: Path) -> None:
    from nbagent._core._messages import OpaqueBlock, RedactedThinkingBlock

    item = {"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAA==", "summary": []}
    messages = [
        Message.user("q"),
        Message(
            "assistant",
            (
                RedactedThinkingBlock("EmmwCkYIBxgC=="),
                OpaqueBlock("openai-responses", item),
                OpaqueBlock("gemini", {"thoughtSignature": "c2ln"}),
                ToolUseBlock("t1", "f", {}),
            ),
        ),
        Message("user", (ToolResultBlock("t1", (TextBlock("ok"),)),)),
    ]
    path = tmp_path / "s.json"
    save_session(path, messages)
    loaded, _ = load_session(path)
    assert loaded == messages
    assert json.dumps(loaded[1].blocks[1].data) == json.dumps(item)  # type: ignore[union-attr]


def test_an_opaque_block_without_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    bad = {"type": "opaque", "provider": "gemini", "data": "not an object"}
    path.write_text(
        json.dumps({"format": 1, "messages": [{"role": "assistant", "content": [bad]}]})
    )
    with pytest.raises(E.SessionFileError, match="opaque block data must be an object"):
        load_session(path)
