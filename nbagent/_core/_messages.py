"""The conversation: content blocks, messages, and session files.

A session file is JSON with a `format` version. Version 0 files (written before tool results had
an `is_error` flag) still load, with `is_error=False`. Saving is atomic: the new content goes to a
temporary file beside the target, is flushed to disk, then renamed over it, so a crash mid-save
leaves the previous file whole.

Two block types hold what a provider needs back and nbagent cannot read:
`RedactedThinkingBlock` (Anthropic's encrypted thinking) and `OpaqueBlock` (a provider's own JSON,
such as an OpenAI Responses reasoning item or a Gemini thought signature). Both go back, unchanged,
only to the wire format that produced them; every other provider leaves them out. Files written
before they existed load as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, cast, get_args

from ..errors import SessionFileError, ToolPairingError
from ._numbers import is_whole

SESSION_FORMAT = 1

Role = Literal["user", "assistant"]
"""Who a message is from. A system prompt is not a message: it is `Agent(system=...)`."""


@dataclass(frozen=True)
class TextBlock:
    """Plain text from the user or the model.

    Attributes:
        text: The text.
        type: The block's kind, for its JSON form ("text"); set by the class.
    """

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class ThinkingBlock:
    """The model's visible reasoning.

    Attributes:
        thinking: The reasoning text.
        signature: The provider's proof that it wrote this, sent back unchanged so the provider
            accepts the thinking in the next request ("" when there is none).
        type: The block's kind, for its JSON form ("thinking"); set by the class.
    """

    thinking: str
    signature: str = ""
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True)
class RedactedThinkingBlock:
    """Thinking the provider encrypted (Anthropic's `redacted_thinking`). Unreadable, but a
    thinking + tool-use conversation is refused without it, so it is kept and sent back as is.

    Attributes:
        data: The encrypted reasoning, as received.
        type: The block's kind, for its JSON form ("redacted_thinking"); set by the class.
    """

    data: str
    type: Literal["redacted_thinking"] = "redacted_thinking"


@dataclass(frozen=True)
class OpaqueBlock:
    """Provider state carried in the conversation but not interpreted by nbagent.

    `provider` names the wire format that produced it (`"gemini"`, `"openai-responses"`) and is
    the only one it is sent back to; `data` is the JSON object exactly as received (a Responses
    reasoning item with its `encrypted_content`, a Gemini part's `thoughtSignature`). Signatures
    and encrypted reasoning are what let a reasoning model continue a tool-using turn; a history
    without them is refused or reasons from scratch. Where it sits among the message's blocks is
    part of its meaning (each provider module says how).

    Attributes:
        provider: The wire format that produced it, the only one it is sent back to.
        data: The JSON object exactly as received.
        type: The block's kind, for its JSON form ("opaque"); set by the class.
    """

    provider: str
    data: dict[str, Any]
    type: Literal["opaque"] = "opaque"


@dataclass(frozen=True)
class ImageBlock:
    """An image in a user message or a tool result.

    Attributes:
        data: The image's bytes, base64-encoded.
        media_type: Its MIME type ("image/png", "image/jpeg", ...).
        type: The block's kind, for its JSON form ("image"); set by the class.
    """

    data: str  # base64
    media_type: str = "image/png"
    type: Literal["image"] = "image"


@dataclass(frozen=True)
class ToolUseBlock:
    """A tool call the model made.

    Attributes:
        id: The provider's id of the call; its result's `tool_use_id` is the same.
        name: The tool's name.
        input: The decoded arguments.
        raw_input: The arguments' text when it did not decode as JSON (the tool then gets an
            error result saying so), else None.
        type: The block's kind, for its JSON form ("tool_use"); set by the class.
    """

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    raw_input: str | None = None
    type: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True)
class ToolResultBlock:
    """The answer to one tool call.

    Attributes:
        tool_use_id: The id of the call it answers.
        content: What the tool gave: text and images.
        is_error: Whether it is an error result: how a failed tool reaches the model (the
            third action) instead of ending the run.
        type: The block's kind, for its JSON form ("tool_result"); set by the class.
    """

    tool_use_id: str
    content: tuple[TextBlock | ImageBlock, ...] = ()
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        """The result's text blocks, joined."""
        return "".join(p.text for p in self.content if isinstance(p, TextBlock))


Block = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | OpaqueBlock
    | ImageBlock
    | ToolUseBlock
    | ToolResultBlock
)


@dataclass(frozen=True)
class Message:
    """One turn of the conversation: a role and its blocks.

    Frozen, so a failed attempt can never change the history the retry sends again.

    Attributes:
        role: "user" or "assistant" (tool results travel in user messages).
        blocks: Its content, in order: text, thinking, images, tool calls, tool results.
    """

    role: Role
    blocks: tuple[Block, ...] = ()

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message of one text block.

        Args:
            text: What the user says (a prompt, a follow-up).

        Returns:
            The message, with role "user".
        """
        return cls("user", (TextBlock(text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message of one text block (for a history written by hand).

        Args:
            text: The model's answer, as if it had given it.

        Returns:
            The message, with role "assistant".
        """
        return cls("assistant", (TextBlock(text),))

    @property
    def text(self) -> str:
        """The message's text blocks, joined (thinking and tool blocks left out)."""
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool calls in it, in order."""
        return [b for b in self.blocks if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The tool results in it, in order."""
        return [b for b in self.blocks if isinstance(b, ToolResultBlock)]

    def to_dict(self) -> dict[str, Any]:
        """The message as JSON-ready data, as a session file holds it.

        Returns:
            `{"role": ..., "content": [block, ...]}`.
        """
        return {"role": self.role, "content": [block_to_dict(b) for b in self.blocks]}

    @classmethod
    def from_dict(cls, data: Any) -> Message:
        """A message from its JSON form (`to_dict`'s, or content given as a plain string).

        Args:
            data: The decoded JSON.

        Returns:
            The message.

        Raises:
            ValueError: `data` is not a message: not an object, an unknown role, or content
                that is neither a string nor a list of known blocks.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a message must be an object, not {type(data).__name__}")
        role = data.get("role")
        if role not in ("user", "assistant"):
            raise ValueError(f"unknown message role {role!r}")
        content = data.get("content", [])
        if isinstance(content, str):
            return cls(role, (TextBlock(content),))
        if not isinstance(content, list):
            raise ValueError("message content must be a list of blocks")
        return cls(role, tuple(block_from_dict(b) for b in content))


def block_to_dict(block: Block) -> dict[str, Any]:
    """A block's JSON form: its `type`, then its fields as they are (a tool call's `raw_input`
    only when it has one; a tool result's parts in their own JSON form)."""
    d: dict[str, Any] = {"type": block.type}
    d.update((f.name, getattr(block, f.name)) for f in fields(block) if f.name != "type")
    if isinstance(block, ToolUseBlock) and block.raw_input is None:
        del d["raw_input"]
    if isinstance(block, ToolResultBlock):
        d["content"] = [block_to_dict(p) for p in block.content]
    return d


_BLOCK_TYPES: dict[str, Any] = {cls.type: cls for cls in get_args(Block)}
# what a field's JSON value must be, by its annotation (any other annotation takes what it gets)
_EXPECTED = {
    "str": (str, "a string"),
    "dict[str, Any]": (dict, "an object"),
    "bool": (bool, "true or false"),
}


def block_from_dict(data: Any) -> Block:
    """A block from its JSON form (`block_to_dict`'s): each field checked against its type, a
    field left out or null at its default; a tool result's content may be a plain string."""
    if not isinstance(data, dict):
        raise ValueError(f"a content block must be an object, not {type(data).__name__}")
    kind = data.get("type")
    cls = _BLOCK_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown content block type {kind!r}")
    given: dict[str, Any] = {}
    for f in fields(cls):
        value = data.get(f.name)
        optional = f.default is not MISSING or f.default_factory is not MISSING
        if f.name == "type" or (value is None and optional):
            continue  # the class's own, or left at its default
        if f.name == "content":
            value = _result_parts(value)
        elif f.type in _EXPECTED and not isinstance(value, _EXPECTED[f.type][0]):
            raise ValueError(f"{kind} block {f.name} must be {_EXPECTED[f.type][1]}")
        given[f.name] = value
    return cast(Block, cls(**given))


def _result_parts(content: Any) -> tuple[TextBlock | ImageBlock, ...]:
    if isinstance(content, str):
        return (TextBlock(content),)
    if not isinstance(content, list):
        raise ValueError("tool_result content must be a list or a string")
    items = [block_from_dict(p) for p in content]
    if not all(isinstance(p, (TextBlock, ImageBlock)) for p in items):
        raise ValueError("tool_result content holds only text and image parts")
    return tuple(p for p in items if isinstance(p, (TextBlock, ImageBlock)))


def repair_tool_pairing(messages: list[Message], *, strict: bool = False) -> list[Message]:
    """Give every tool_use exactly one tool_result in the next message.

    A history cut off between a tool call and its result (a crash, a hand-edited file) cannot be
    sent: providers reject it. With `strict=False` the missing results are synthesised as error
    results the model can read; with `strict=True` a `ToolPairingError` says where.
    """
    out = list(messages)
    i = 0
    while i < len(out):
        uses = out[i].tool_uses if out[i].role == "assistant" else []
        nxt = out[i + 1] if i + 1 < len(out) else None
        answered = (
            {r.tool_use_id for r in nxt.tool_results} if nxt and nxt.role == "user" else set()
        )
        missing = [u for u in uses if u.id not in answered]
        if missing:
            if strict:
                names = ", ".join(f"{u.name} ({u.id})" for u in missing)
                raise ToolPairingError(f"message {i} has tool calls without results: {names}")
            synth = tuple(
                ToolResultBlock(
                    u.id,
                    (TextBlock(f"Tool `{u.name}` produced no result (the run was interrupted)."),),
                    is_error=True,
                )
                for u in missing
            )
            if nxt is not None and nxt.role == "user":
                out[i + 1] = Message("user", synth + nxt.blocks)
            else:
                out.insert(i + 1, Message("user", synth))
        i += 1
    return out


def save_session(
    path: str | os.PathLike[str], messages: list[Message], meta: dict[str, Any] | None = None
) -> None:
    """Write a session file atomically: a crash leaves the old file or the new, never half.

    The file is JSON (UTF-8) with a format version, so a later nbagent can read it. No keys
    are stored: a session holds messages, not the agent's configuration.

    Args:
        path: Where to write; its folder must exist.
        messages: The conversation.
        meta: Anything JSON-ready to keep beside it (`Agent.save` keeps the models and the
            whole transcript).

    Raises:
        OSError: The file cannot be written (no half-written file is left behind).
    """
    target = Path(path)
    doc = {
        "format": SESSION_FORMAT,
        "meta": meta or {},
        "messages": [m.to_dict() for m in messages],
    }
    try:
        data = json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (half of an emoji split across stream deltas) is not UTF-8: escape
        # everything as \uXXXX, which json.loads turns back into exactly the same text.
        data = json.dumps(doc, ensure_ascii=True, indent=1).encode("ascii")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_session(
    path: str | os.PathLike[str], *, strict_tool_pairing: bool = False
) -> tuple[list[Message], dict[str, Any]]:
    """Read a session file back (what `save_session` wrote, or a bare list of messages).

    Args:
        path: The session file.
        strict_tool_pairing: False (the default): a tool call without a result (a run that
            was interrupted) gets an error result, so a provider accepts the history. True:
            raise instead.

    Returns:
        `(messages, meta)`: the conversation and what was kept beside it.

    Raises:
        SessionFileError: The file cannot be read, is not JSON, is from a newer nbagent, or
            holds something that is not a message; the message names the file and the problem.
        ToolPairingError: `strict_tool_pairing` and a tool call has no result.
    """
    target = Path(path)
    try:
        raw = target.read_bytes()
    except OSError as exc:
        raise SessionFileError(target, exc.strerror or str(exc)) from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SessionFileError(target, f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise SessionFileError(
            target, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise SessionFileError(target, "JSON nested too deeply") from None
    if isinstance(doc, list):  # format 0: a bare list of messages
        doc = {"format": 0, "messages": doc}
    if not isinstance(doc, dict):
        raise SessionFileError(target, "the top level must be an object with 'messages'")
    version = doc.get("format", 0)
    if not (is_whole(version) and version >= 0):
        raise SessionFileError(target, f"format version {version!r} is not a number")
    if version > SESSION_FORMAT:
        raise SessionFileError(
            target, f"format version {version} is newer than this nbagent reads ({SESSION_FORMAT})"
        )
    items = doc.get("messages")
    if not isinstance(items, list):
        raise SessionFileError(target, "'messages' is missing or not a list")
    messages: list[Message] = []
    for i, item in enumerate(items):
        try:
            messages.append(Message.from_dict(item))
        except (ValueError, TypeError) as exc:
            raise SessionFileError(target, f"message {i}: {exc}") from None
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise SessionFileError(target, "'meta' must be an object")
    return repair_tool_pairing(messages, strict=strict_tool_pairing), meta
