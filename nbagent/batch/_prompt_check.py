"""A batch's prompts checked before any request: none missing, none empty.

A NaN in a DataFrame column (a row with no text) used to be sent as "" and answered anyway, as
was an empty string; a model asked nothing answers something, and the row then looks like a
result. So a missing or empty prompt is a `ConfigError` naming its rows, before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..errors import ConfigError

__all__ = ["refuse_blank_prompts"]

_SHOWN = 5  # rows named in the sentence; the rest counted


def _blank(value: object) -> str:
    """How `value` is missing or empty ("NaN", "None", '""'), or "" when it is a prompt."""
    if value is None:
        return "None"
    if isinstance(value, str):
        return repr(value).replace("'", '"') if not value.strip() else ""
    try:
        missing = bool(pd.isna(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""  # a list or an array: not a scalar that is missing
    if not missing:
        return ""
    return "NaN" if isinstance(value, float) else str(value)


def refuse_blank_prompts(values: Sequence[object], labels: Sequence[object] | None) -> None:
    """Raise a `ConfigError` naming the rows whose prompt is missing or empty.

    Args:
        values: The prompts as given (before they are made text).
        labels: The Series' or DataFrame's index labels; None for a list (positions).

    Raises:
        ConfigError: Some prompt is None, NaN (or another missing value) or only whitespace.
    """
    bad = [(i, how) for i, v in enumerate(values) if (how := _blank(v))]
    if not bad:
        return
    names = [f"{labels[i] if labels is not None else i!r} ({how})" for i, how in bad[:_SHOWN]]
    if len(bad) > _SHOWN:
        names.append(f"and {len(bad) - _SHOWN} more")
    one = len(bad) == 1
    if labels is not None:
        where = "index" if one else "indices"
    else:
        where = "position" if one else "positions"
    hint = ' (series.dropna(), series[series.str.strip() != ""])' if labels is not None else ""
    raise ConfigError(
        f"map(): {len(bad)} of {len(values)} prompts {'is' if one else 'are'} missing or "
        f"empty, at {where} {', '.join(names)}; drop or fill {'it' if one else 'them'} "
        f"first{hint}"
    )
