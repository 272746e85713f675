"""One visual language: the widget's CSS and legend are the palette the static plots use.

`nbagent/_palette.py` is the reference; timeline.css and timeline.js are hand-written, so these
tests read them and fail when a colour or a legend word drifts on either side. (The browser test
in test_widget_browser.py checks the colours Chromium actually paints.)
"""

from __future__ import annotations

import re
from pathlib import Path

from matplotlib.colors import to_hex, to_rgba

from nbagent._palette import COLORS, CSS_VARIABLES, LEGEND, SWATCHES

WIDGET = Path(__file__).resolve().parent.parent / "nbagent" / "notebook"
CSS = (WIDGET / "timeline.css").read_text(encoding="utf-8")
JS = (WIDGET / "timeline.js").read_text(encoding="utf-8")


def root_variables() -> dict[str, str]:
    block = re.search(r"\.nb-root \{(.*?)\n\}", CSS, re.S)
    assert block is not None
    return dict(re.findall(r"(--nb-[\w-]+):\s*(#[0-9a-fA-F]{6});", block.group(1)))


def test_every_css_colour_variable_is_the_palettes() -> None:
    variables = root_variables()
    for name, role in CSS_VARIABLES.items():
        assert variables.get(name, "").lower() == COLORS[role], name
    colour_vars = {v for v in variables if not v.startswith(("--nb-fg", "--nb-muted"))}
    assert colour_vars <= set(CSS_VARIABLES), colour_vars - set(CSS_VARIABLES)


def test_wait_stripes_are_the_palettes_colours() -> None:
    # the hatched waits mix their colour with transparency: the rgb part must be the palette's
    for selector, key in (
        ("}\n\n.nb-wait {", "backoff"),
        ("}\n\n.nb-wait.nb-server-wish {", "retry_after"),
        ("}\n\n.nb-wait.nb-paced {", "paced"),
    ):
        begin = CSS.index(selector) + len(selector)  # the rule itself, not a shared one
        rule = CSS[begin : CSS.index("}", begin)]
        rgbs = {tuple(int(x) for x in m) for m in re.findall(r"rgba\((\d+), (\d+), (\d+)", rule)}
        want = tuple(round(c * 255) for c in to_rgba(SWATCHES[key].face)[:3])
        assert rgbs == {want}, (selector, rgbs, want)


def test_the_widgets_legend_is_the_palettes_legend() -> None:
    items = re.findall(r'item\("([^"]+)", "([^"]+)"\)', JS[JS.index("function legend(") :])
    expected = [(SWATCHES[k].css_class, SWATCHES[k].word) for k in (*LEGEND, "paced")]
    assert items == expected


def test_solid_swatches_use_the_css_class_of_their_colour() -> None:
    # "nb-error" paints var(--nb-error): the class a swatch names must paint the swatch's face
    by_var = {COLORS[role]: name for name, role in CSS_VARIABLES.items()}
    for swatch in SWATCHES.values():
        if swatch.hatch:
            continue
        last = swatch.css_class.split()[0]
        rule = re.search(rf"\.{last} \{{\s*background-color: var\((--nb-[\w-]+)\)", CSS)
        assert rule is not None, last
        assert rule.group(1) == by_var[to_hex(swatch.face)], swatch
