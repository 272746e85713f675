"""Student names and room secrets: what a room accepts as a name, and the codes it hands out.

A name is typed by a student into a notebook and shown on the teacher's screen, so it is
cleaned once, here: control characters (and other invisible format characters) dropped,
whitespace runs made one space, at most `MAX_NAME` characters; a second student with the
same name gets a suffix (" (2)"). The dashboard still escapes every name it shows.
"""

from __future__ import annotations

import secrets
import unicodedata
from collections.abc import Container
from urllib.parse import quote, unquote

__all__ = [
    "MAX_NAME",
    "NAME_HEADER",
    "clean_name",
    "decode_name",
    "encode_name",
    "join_code",
    "teacher_token",
    "unique_name",
]

MAX_NAME = 40
NAME_HEADER = "x-nbagent-student"
"""The header a student's name travels in (percent-encoded, so any name is a valid header)."""

_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud to a room


def clean_name(raw: str) -> str:
    """The name as the room keeps it: controls dropped, spaces folded, at most 40 characters.

    Args:
        raw: What the student typed.

    Returns:
        The cleaned name; empty when nothing printable was left.
    """
    kept = "".join(
        " " if ch.isspace() else ch
        for ch in str(raw)
        if ch.isspace() or unicodedata.category(ch)[0] != "C"
    )
    return " ".join(kept.split())[:MAX_NAME].strip()


def unique_name(name: str, taken: Container[str]) -> str:
    """`name`, or `name (2)`, `name (3)`, ... : the first not yet taken, still 40 characters.

    Args:
        name: A cleaned name.
        taken: The names already in the room.

    Returns:
        A name no other student has.
    """
    if name not in taken:
        return name
    n = 2
    while True:
        suffix = f" ({n})"
        candidate = name[: MAX_NAME - len(suffix)].rstrip() + suffix
        if candidate not in taken:
            return candidate
        n += 1


def encode_name(name: str) -> str:
    """The name as a header value (percent-encoded UTF-8)."""
    return quote(name, safe=" ()'-_.,")


def decode_name(value: str) -> str:
    """A name header back to the name (cleaned again: a header is not trusted)."""
    return clean_name(unquote(value, errors="replace"))


def join_code(rng: secrets.SystemRandom | None = None) -> str:
    """A join code such as ``K7QF-29XD``: eight characters a teacher can read out."""
    pick = rng.choice if rng is not None else secrets.choice
    chars = "".join(pick(_CODE_ALPHABET) for _ in range(8))
    return f"{chars[:4]}-{chars[4:]}"


def teacher_token() -> str:
    """The teacher's secret: in the dashboard's URL, never shown to students."""
    return secrets.token_urlsafe(18)
