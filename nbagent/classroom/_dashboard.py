"""The teacher's dashboard: one HTML page (inline CSS and JS, no build step), live by SSE.

Its colours come from `nbagent._palette` (light and dark), so the room reads like the other
views; every name is written with `textContent`, never as HTML.
"""

from __future__ import annotations

from pathlib import Path

from .._palette import COLORS, DARK_COLORS

__all__ = ["PAGE", "page"]

_ROLES = (
    "fg",
    "muted",
    "bg",
    "panel",
    "border",
    "ok",
    "error",
    "running",
    "retry_after",
    "backoff_text",
    "retry_after_text",
    "ok_dark",
    "error_dark",
)


def _variables(colors: dict[str, str]) -> str:
    return "".join(f"--c-{role.replace('_', '-')}:{colors[role]};" for role in _ROLES)


def page() -> str:
    """The dashboard's HTML, with the palette's colours filled in."""
    template = Path(__file__).with_name("dashboard.html").read_text(encoding="utf-8")
    return template.replace("/*LIGHT*/", _variables(COLORS)).replace(
        "/*DARK*/", _variables(DARK_COLORS)
    )


PAGE = page()
