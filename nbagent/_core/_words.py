"""Words in the sentences nbagent prints: counted nouns ("1 prompt", "2 prompts", never "1
prompts"), and texts cut to a length."""

from __future__ import annotations


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


def shortened(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with "…" as the last one when it is longer.

    Args:
        text: The text.
        limit: The most characters it may have.

    Returns:
        `text`, or its first `limit - 1` characters and "…".
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"
