"""One visual language: the widget's CSS and legend are the palette the static plots use.

`nbagent/_palette.py` is the reference; timeline.css and timeline.js are hand-written, so these
tests read them and fail when a colour or a legend word drifts on either side. (The browser test
in test_widget_browser.py checks the colours Chromium actually paints.)
"""

from __future__ import annotations

import re
from pathlib import Path

from matplotlib.colors import to_hex

from nbagent._palette import COLORS, CSS_VARIABLES, DARK_COLORS, LEGEND, SWATCHES

WIDGET = Path(__file__).resolve().parent.parent / "nbagent" / "notebook"
CSS = (WIDGET / "timeline.css").read_text(encoding="utf-8")
JS = (WIDGET / "timeline.js").read_text(encoding="utf-8")


def variables_of(selector: str) -> dict[str, str]:
    begin = CSS.index(selector + " {") + len(selector) + 2
    block = CSS[begin : CSS.index("}", begin)]
    return dict(re.findall(r"(--nb-[\w-]+):\s*(?:var\(--jp-[\w-]+, )?(#[0-9a-fA-F]{6})\)?;", block))


def test_every_css_colour_variable_is_the_palettes() -> None:
    # the light block, JupyterLab Dark's block and the exported page's dark one
    for selector, colours in (
        ("\n.nb-root", COLORS),
        ('body[data-jp-theme-light="false"] .nb-root', DARK_COLORS),
        ("  body.nb-page .nb-root", DARK_COLORS),
    ):
        variables = variables_of(selector)
        for name, role in CSS_VARIABLES.items():
            assert variables.get(name, "").lower() == colours[role], (selector, name)
        for name in ("fg", "muted", "bg", "panel", "border"):
            assert variables[f"--nb-{name}"] == colours[name], (selector, name)
        assert set(variables) - set(CSS_VARIABLES) == {
            "--nb-fg",
            "--nb-muted",
            "--nb-bg",
            "--nb-panel",
            "--nb-border",
        }


def test_wait_stripes_are_the_palettes_colours() -> None:
    # the hatched waits mix their own colour with transparency, in either theme
    for selector, variable in (
        ("}\n\n.nb-wait {", "--nb-wait"),
        ("}\n\n.nb-wait.nb-server-wish {", "--nb-wish"),
        ("}\n\n.nb-wait.nb-paced {", "--nb-paced"),
    ):
        begin = CSS.index(selector) + len(selector)  # the rule itself, not a shared one
        rule = CSS[begin : CSS.index("}", begin)]
        mixed = set(re.findall(r"color-mix\(in srgb, var\((--nb-[\w-]+)\)", rule))
        assert mixed == {variable}, (selector, mixed)
        assert "rgba(" not in rule


def test_the_widgets_legend_is_the_palettes_legend() -> None:
    items = re.findall(r'item\("([^"]+)", "([^"]+)"\)', JS[JS.index("function legend(") :])
    expected = [(SWATCHES[k].css_class, SWATCHES[k].word) for k in (*LEGEND, "paced", "reask")]
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
