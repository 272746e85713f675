"""The timeline's visual language in one place: colours, hatches and legend words.

The live widget (`notebook/timeline.css`, `timeline.js`) and the static figures of
`nbagent.analysis` must tell the same story in the same colours: a reader who learnt that purple
stripes are "the server's Retry-After" in the widget should read a PNG without a second legend.
The CSS stays hand-written (it is read by people styling it), so this module is the reference
it is tested against: `tests/test_palette.py` checks every `--nb-*` variable, every legend word
and every swatch's computed colour in the browser against the values here.

Pure data, no imports of nbagent: both presentation layers (notebook, analysis) read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "COLORS",
    "CSS_VARIABLES",
    "FONT_SIZE",
    "LABEL_FONT_SIZE",
    "LEGEND",
    "SWATCHES",
    "Swatch",
]

COLORS: Final[dict[str, str]] = {
    "fg": "#1f2328",
    "muted": "#656d76",
    "panel": "#f6f8fa",
    "border": "#d0d7de",
    "ok": "#2da44e",
    "ok_dark": "#1a7f37",
    "error": "#d1242f",
    "error_dark": "#a40e26",
    "cancelled": "#8c959f",
    "running": "#0969da",
    "backoff": "#d4a72c",
    "backoff_text": "#6b4d00",
    "retry_after": "#8250df",
    "retry_after_text": "#4c2889",
    "compaction": "#1b7c83",
    "paced": "#6e7781",
    "warning": "#9a6700",
}
"""Hex colours by role. "backoff" is the widget's wait colour, "retry_after" its server-wish
purple; the `_text` and `_dark` shades are for words written on or next to them."""

CSS_VARIABLES: Final[dict[str, str]] = {
    "--nb-ok": "ok",
    "--nb-ok-dark": "ok_dark",
    "--nb-error": "error",
    "--nb-error-dark": "error_dark",
    "--nb-cancelled": "cancelled",
    "--nb-running": "running",
    "--nb-wait": "backoff",
    "--nb-wish": "retry_after",
    "--nb-compact": "compaction",
    "--nb-paced": "paced",
}
"""Which `COLORS` entry each custom property of timeline.css holds."""


@dataclass(frozen=True)
class Swatch:
    """One legend entry: the word the widget writes, and how the shape is painted.

    `hatch` is matplotlib's pattern for the widget's stripes (the CSS draws the same 45° lines
    with `repeating-linear-gradient`); `face_alpha` is the transparency of the fill under them.
    """

    word: str
    css_class: str
    face: str
    edge: str
    hatch: str = ""
    face_alpha: float = 1.0
    dashed: bool = False


def _solid(word: str, css_class: str, color: str) -> Swatch:
    return Swatch(word, css_class, COLORS[color], COLORS[color])


def _striped(word: str, css_class: str, color: str, alpha: float) -> Swatch:
    return Swatch(
        word, css_class, COLORS[color], COLORS[color], "\\\\\\", face_alpha=alpha, dashed=True
    )


SWATCHES: Final[dict[str, Swatch]] = {
    "ok": _solid("ok", "nb-ok", "ok"),
    "failed": _solid("failed", "nb-error", "error"),
    "cancelled": _solid("cancelled", "nb-cancelled", "cancelled"),
    "running": _solid("running", "nb-running", "running"),
    "backoff": _striped("backoff", "nb-wait", "backoff", 0.12),
    "retry_after": _striped("server's Retry-After", "nb-wait nb-server-wish", "retry_after", 0.1),
    "paced": _striped("paced", "nb-wait nb-paced", "paced", 0.1),
    "compaction": _solid("compaction", "nb-kind-compaction nb-ok", "compaction"),
    "tool_ok": _solid("tool ok", "nb-tool-ok", "ok"),
    "tool_error": _solid("tool error", "nb-tool-error", "error"),
}
"""Every shape the timeline draws, keyed by what it means."""

LEGEND: Final[tuple[str, ...]] = (
    "ok",
    "failed",
    "cancelled",
    "running",
    "backoff",
    "retry_after",
    "compaction",
    "tool_ok",
    "tool_error",
)
"""The widget's legend, in its order ("paced" is added when a rate limiter held a request)."""

FONT_SIZE: Final[float] = 10.0
"""Row labels and titles of the static figures, in points."""

LABEL_FONT_SIZE: Final[float] = 9.0
"""The smallest text the static figures write (lane names, bar labels, legend), in points:
at the notebook's default size smaller text is a grey smear."""
