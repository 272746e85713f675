"""Counted nouns in the sentences nbagent prints: "1 prompt", "2 prompts", never "1 prompts"."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, the noun in the plural unless `n` is 1.

    Args:
        n: How many.
        noun: The singular ("prompt", "provider batch").
        plural: The plural when it is not `noun` + "s" ("provider batches").

    Returns:
        "1 prompt", "0 prompts", "3 provider batches".
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
