"""The compressed time axis on a matplotlib Axes: its ticks and break signs.

The mapping itself (which quiet stretches are drawn shorter, and how much) is `nbagent._axis`,
shared with the live widget and the HTML report so that the three pictures agree; this module
draws its marks: round times as ticks and "//" on the axis line for each shortened stretch.
"""

from __future__ import annotations

from typing import Any

from .._axis import Axis
from .._palette import COLORS, LABEL_FONT_SIZE
from ._figures import text_patch


def apply_axis(axis: Axis, ax: Any) -> None:
    """Label `ax`'s x axis, which is drawn in positions (`Axis.at` of the seconds), with round
    times, and mark each shortened stretch with a break sign ("//" on the axis line, as on a
    hand-drawn broken axis). Drawing in positions keeps the axis linear: a matplotlib function
    scale would transform every bar of a batch on every draw."""
    from matplotlib.transforms import blended_transform_factory

    on_axis = blended_transform_factory(ax.transData, ax.transAxes)
    for start, end in axis.breaks:
        ax.text(
            (axis.at(start) + axis.at(end)) / 2,
            0.0,
            "//",
            transform=on_axis,
            ha="center",
            va="center",
            fontsize=LABEL_FONT_SIZE + 1,
            fontweight="bold",
            color=COLORS["muted"],
            bbox=text_patch("white", "square,pad=0.05"),
            clip_on=False,
            zorder=6,
        )
    ticks = axis.labelled_ticks()
    ax.set_xticks([axis.at(t) for t, _ in ticks], labels=[label for _, label in ticks])
