"""`plot_what_if`: the recorded timeline above the one another policy would have had.

Both are drawn on one time scale (seconds from the first attempt, not shortened), so the
difference in makespan is the difference in length; colours, stripes and legend words are the
widget's (`nbagent._palette`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from .._palette import COLORS, FONT_SIZE, LABEL_FONT_SIZE
from ._figures import legend_patch, new_figure, nothing
from ._timeline import _LANE_IN, _draw, _picture


def plot_what_if(
    result: Any,
    what_if: pd.DataFrame | None = None,
    *,
    titles: Sequence[str] | None = None,
    max_groups: int = 20,
) -> Figure:
    """The recorded attempts above the new policy's, in the shared palette.

    `result` is what `nbagent.simulate.what_if` returned (its `recorded` and `attempts`
    frames), or the recorded frame itself with the other one as `what_if`. Each panel shows at
    most `max_groups` runs (requests); its title carries its row of the comparison.

    Args:
        result: A `WhatIf`, or the recorded attempt frame.
        what_if: The new policy's attempt frame, when `result` is a frame.
        titles: The two panels' titles; None for ones with the comparison's numbers.
        max_groups: The most runs per panel.

    Returns:
        A matplotlib figure (not shown; a notebook shows it as the cell's value). An empty frame
            gives a small figure that says so, never an exception.
    """
    if what_if is None:
        recorded, new, table = result.recorded, result.attempts, result.comparison
    else:
        recorded, new, table = result, what_if, None
    heads = list(titles) if titles is not None else ["Recorded", "What if"]
    if table is not None and titles is None:  # a WhatIf's table has both rows
        for i, key in enumerate(("recorded", "what if")):
            row = table.loc[key]
            heads[i] += (
                f": {row['attempts']} attempts, {row['rejected']} rejected, "
                f"{row['makespan_s']:.1f} s, {row['outcome']}"
            )
    pics = [_picture(df, max_groups, compress=False) for df in (recorded, new)]
    drawn = [p for p in pics if not isinstance(p, str)]
    if not drawn:
        return nothing("no attempts")
    heights = [p.rows.height if not isinstance(p, str) else 1.0 for p in pics]  # each >= 1 lane
    fig = new_figure(10.0, 2.0 + _LANE_IN * sum(heights))
    axes = fig.subplots(2, 1, height_ratios=heights, squeeze=True)
    span = max(p.axis.width for p in drawn)
    keys: list[str] = []
    for ax, pic, head in zip(axes, pics, heads, strict=True):
        if isinstance(pic, str):
            ax.text(0.5, 0.5, pic, ha="center", va="center", color=COLORS["muted"])
            ax.set_axis_off()
        else:
            _draw(ax, pic, None, _LANE_IN)
            ax.set_xlim(-span * 0.01, span * 1.01)  # one scale for both panels
            ax.xaxis.set_major_locator(MaxNLocator(8))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}s"))
            keys += [k for k in pic.legend_keys() if k not in keys]
        ax.set_title(head, loc="left", fontsize=FONT_SIZE, color=COLORS["fg"])
    fig.legend(
        handles=[legend_patch(k) for k in keys],
        loc="outside lower center",
        ncol=max(1, len(keys)),
        fontsize=LABEL_FONT_SIZE,
        frameon=False,
    )
    return fig
