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

# The colours are Okabe & Ito's colour-blind-safe set (bluish green, vermillion, orange, reddish
# purple, blue, sky blue; tools in a dark blue and a dark wine by day, their pale tints by night,
# so a tool call never shares a request's colour), shaded until two conditions hold together:
# every pair of the DISTINCT_ROLES stays at least 10 CIEDE2000 apart under simulated protanopia,
# deuteranopia and tritanopia (Machado et al. 2009, severity 1), and every shape keeps 3:1
# against the lane behind it and every word 4.5:1 against what it is written on (WCAG 2.1 AA).
# tests/test_palette_access.py checks both, for the light and the dark theme.

_THEMES: Final[dict[str, tuple[str, str]]] = {
    "fg": ("#1f2328", "#e6edf3"),
    "muted": ("#59636e", "#a0a8b1"),
    "bg": ("#ffffff", "#111111"),
    "panel": ("#f6f8fa", "#212121"),
    "border": ("#d0d7de", "#4a4f55"),
    "ok": ("#009e73", "#009e73"),
    "ok_dark": ("#00805d", "#21ab85"),
    "error": ("#aa4b00", "#bb5300"),
    "error_dark": ("#a34800", "#cd8145"),
    "cancelled": ("#818992", "#8c959f"),
    "running": ("#3d94c4", "#56b4e9"),
    "backoff": ("#b87f00", "#ebb233"),
    "backoff_text": ("#885e00", "#ebb233"),
    "retry_after": ("#8b5272", "#9b5c7f"),
    "retry_after_text": ("#8b5272", "#b586a0"),
    "compaction": ("#0072b2", "#0072b2"),
    "compaction_text": ("#0068a2", "#4a9bc8"),
    "tool_ok": ("#243b6b", "#b8a4ff"),
    "tool_error": ("#661a33", "#ffcee7"),
    "paced": ("#6e7781", "#8c959f"),
    "paced_text": ("#5f666f", "#939ba5"),
    "warning": ("#885e00", "#ebb233"),
    "ok_ink": ("#000000", "#000000"),
    "error_ink": ("#ffffff", "#ffffff"),
    "cancelled_ink": ("#000000", "#000000"),
    "running_ink": ("#000000", "#000000"),
    "compaction_ink": ("#ffffff", "#ffffff"),
    "tool_ok_ink": ("#ffffff", "#000000"),
    "tool_error_ink": ("#ffffff", "#000000"),
}
"""Each role's hex colour: in the light theme (and the static figures), and in the dark one."""

COLORS: Final[dict[str, str]] = {role: light for role, (light, _) in _THEMES.items()}
"""Hex colours by role, light theme (and the static figures). "backoff" is the widget's wait
colour, "retry_after" its server-wish purple; the `_text` and `_dark` shades are for words
written next to them, the `_ink` ones for words written on a bar of that colour."""

DARK_COLORS: Final[dict[str, str]] = {role: dark for role, (_, dark) in _THEMES.items()}
"""The same roles for a dark page (JupyterLab Dark, or a browser that prefers dark)."""

DISTINCT_ROLES: Final[tuple[str, ...]] = (
    "ok",
    "error",
    "cancelled",
    "backoff",
    "retry_after",
    "compaction",
    "tool_ok",
    "tool_error",
)
"""The roles a reader must tell apart, with any colour vision (ok, failed, cancelled, backoff,
the server's Retry-After, compaction, tool ok, tool error): a tool call is told from a request
by its colour, not only by its lane."""

_PAGE_ROLES = ("fg", "muted", "bg", "panel", "border")  # the page's own: no --nb-* variable
_CSS_WORDS = (("backoff", "wait"), ("retry_after", "wish"), ("compaction", "compact"))


def _css_variable(role: str) -> str:
    """ "--nb-wait-text" for "backoff_text": the role's name, in the CSS's shorter words."""
    for long, short in _CSS_WORDS:
        if role.startswith(long):
            role = short + role[len(long) :]
    return "--nb-" + role.replace("_", "-")


CSS_VARIABLES: Final[dict[str, str]] = {
    _css_variable(role): role for role in COLORS if role not in _PAGE_ROLES
}
"""Which `COLORS` entry each custom property of timeline.css holds (its dark value, written on
the same line, the `DARK_COLORS` one)."""


@dataclass(frozen=True)
class Swatch:
    """One legend entry: the word the widget writes, and how the shape is painted.

    `hatch` is matplotlib's pattern for the widget's stripes (the CSS draws the same 45° lines
    with `repeating-linear-gradient`); `face_alpha` is the transparency of the fill under them.
    `mark` is the pattern drawn over a solid bar so that a failure differs from a success by
    more than its colour (matplotlib's "xx"; the CSS crosses two gradients the same way).
    `ink` is the colour of a word written on the face.
    """

    word: str
    css_class: str
    face: str
    edge: str
    hatch: str = ""
    face_alpha: float = 1.0
    mark: str = ""
    ink: str = "#000000"


def _solid(word: str, css_class: str, color: str, mark: str = "") -> Swatch:
    ink = COLORS.get(f"{color}_ink", COLORS["fg"])
    return Swatch(word, css_class, COLORS[color], COLORS[color], mark=mark, ink=ink)


def _striped(word: str, css_class: str, color: str, alpha: float) -> Swatch:
    return Swatch(word, css_class, COLORS[color], COLORS[color], "\\\\\\", face_alpha=alpha)


FAILURE_MARK: Final[str] = "xx"
"""The cross-hatch over everything that failed (an attempt, a tool call, a compaction)."""

REASK_MARK: Final[str] = "oo"
"""The dots over an attempt whose structured answer was asked for again (a reask): it failed,
but not for good; the CSS draws the same dots with a radial gradient."""

REASK_GLYPH: Final[str] = "↻"
"""The glyph a reask's bar is labelled with (timeline.js, the PNG's bar labels)."""

SWATCHES: Final[dict[str, Swatch]] = {
    "ok": _solid("ok", "nb-ok", "ok"),
    "failed": _solid("failed", "nb-error", "error", FAILURE_MARK),
    "cancelled": _solid("cancelled", "nb-cancelled", "cancelled"),
    "running": _solid("running", "nb-running", "running"),
    "backoff": _striped("backoff", "nb-wait", "backoff", 0.12),
    "retry_after": _striped("server's Retry-After", "nb-wait nb-server-wish", "retry_after", 0.1),
    "paced": _striped("paced", "nb-wait nb-paced", "paced", 0.1),
    "compaction": _solid("compaction", "nb-kind-compaction nb-ok", "compaction"),
    "tool_ok": _solid("tool ok", "nb-tool-ok", "tool_ok"),
    "tool_error": _solid("tool error", "nb-tool-error", "tool_error", FAILURE_MARK),
    "reask": _solid("reasked", "nb-error nb-reask", "error", REASK_MARK),
}
"""Every shape the timeline draws, keyed by what it means."""

LEGEND: Final[tuple[str, ...]] = tuple(k for k in SWATCHES if k not in ("paced", "reask"))
"""The widget's legend, in its order ("paced" is added when a rate limiter held a request,
"reask" when a structured answer was asked for again)."""

FONT_SIZE: Final[float] = 10.0
"""Row labels and titles of the static figures, in points."""

LABEL_FONT_SIZE: Final[float] = 9.0
"""The smallest text the static figures write (lane names, bar labels, legend), in points:
at the notebook's default size smaller text is a grey smear."""
