"""A conversation on disk: `Agent.save` and `Agent.load`, the history and its full transcript in
one session file (atomically written; no keys stored)."""

from __future__ import annotations

import os

from .._core._messages import Message, load_session, save_session
from ..errors import HostError


def save_conversation(
    path: str | os.PathLike[str],
    history: list[Message],
    transcript: list[Message],
    models: list[str],
) -> None:
    """Write the session file (HostError, and no half-written file, when it cannot be)."""
    try:
        save_session(
            path,
            history,
            {"models": models, "transcript": [m.to_dict() for m in transcript]},
        )
    except OSError as exc:
        # strerror, not str(exc): the latter names the hidden temporary file, not `path`
        why = exc.strerror or str(exc)
        raise HostError(f"saving the session to {path} failed: {why}") from exc


def load_conversation(
    path: str | os.PathLike[str], strict_tool_pairing: bool
) -> tuple[list[Message], list[Message]]:
    """The history and the transcript of a session file (the history again when the file has
    no readable transcript)."""
    messages, meta = load_session(path, strict_tool_pairing=strict_tool_pairing)
    transcript = meta.get("transcript")
    if isinstance(transcript, list):
        try:
            return messages, [Message.from_dict(m) for m in transcript]
        except ValueError:
            pass
    return messages, list(messages)
