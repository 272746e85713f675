"""The figure every plot draws on, and the widget's swatches as matplotlib artists.

Figures are built without pyplot: nothing pops up, nothing is registered globally, nothing leaks
when a notebook re-runs a cell. They render themselves as PNG in Jupyter (`_repr_png_`).
Colours, hatches and legend words come from `nbagent._palette`, the widget's visual language.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .._palette import COLORS, FONT_SIZE, LABEL_FONT_SIZE, SWATCHES, Swatch


class _Figure(Figure):
    """A Figure that shows itself as PNG in Jupyter even when pyplot was never imported."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()


def new_figure(width: float, height: float) -> Figure:
    return _Figure(figsize=(width, height), layout="constrained")


def nothing(text: str = "no attempts") -> Figure:
    """A small figure that says why there is nothing to draw (never an exception)."""
    fig = new_figure(6.0, 2.0)
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=14, color=COLORS["muted"])
    ax.set_axis_off()
    return fig


def bar_style(swatch: Swatch) -> dict[str, Any]:
    """Keyword arguments for `barh` that paint a shape as the widget does."""
    style: dict[str, Any] = {
        "facecolor": to_rgba(swatch.face, swatch.face_alpha),
        "edgecolor": swatch.edge,
        "linewidth": 0.0,
    }
    if swatch.hatch:
        style.update(hatch=swatch.hatch, linewidth=0.9, linestyle=(0, (3, 2)))
    elif swatch.mark:
        style.update(hatch=swatch.mark, edgecolor="white", linewidth=0.4)
    return style


def legend_patch(key: str) -> Patch:
    """The legend entry for `SWATCHES[key]`, labelled with the widget's word."""
    swatch = SWATCHES[key]
    return Patch(label=swatch.word, **bar_style(swatch))


def line(color: str, style: Any, label: str) -> Line2D:
    return Line2D([], [], color=color, linestyle=style, label=label)


def dot(color: str, marker: str, label: str) -> Line2D:
    return Line2D([], [], color=color, marker=marker, linestyle="none", label=label)


def text_patch(face: str, shape: str, **more: Any) -> dict[str, Any]:
    """The borderless patch under words on a figure (`ax.text(..., bbox=...)`)."""
    return {"boxstyle": shape, "facecolor": face, "edgecolor": "none", **more}


def style_axes(ax: Any, *, grid: str = "y") -> None:
    """Quiet axes in the widget's greys, text no smaller than LABEL_FONT_SIZE."""
    ax.tick_params(labelsize=LABEL_FONT_SIZE, colors=COLORS["muted"], labelcolor=COLORS["fg"])
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    for spine in ("left", "bottom"):
        ax.spines[spine].set_color(COLORS["border"])
    if grid:
        ax.grid(axis=grid, color="#e7eaee", linewidth=0.7)
    ax.set_axisbelow(True)
    for axis in (ax.xaxis, ax.yaxis):
        axis.label.set(size=FONT_SIZE, color=COLORS["fg"])
