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


def block(selector: str) -> str:
    begin = CSS.index(selector + " {") + len(selector) + 2
    return CSS[begin : CSS.index("}", begin)]


# `--nb-x: var(--nb-unless-dark, LIGHT) var(--nb-unless-light, DARK);`, perhaps inside a
# JupyterLab variable's fallback: each colour once, with its value in either theme
PAIR = re.compile(
    r"(--nb-[\w-]+):\s*(?:var\(--jp-[\w-]+, )?"
    r"var\(--nb-unless-dark, (#[0-9a-fA-F]{6})\) var\(--nb-unless-light, (#[0-9a-fA-F]{6})\)\)?;"
)


def test_every_css_colour_variable_is_the_palettes() -> None:
    light: dict[str, str] = {}
    dark: dict[str, str] = {}
    for name, day, night in PAIR.findall(block("\n.nb-root")):
        light[name], dark[name] = day.lower(), night.lower()
    for variables, colours in ((light, COLORS), (dark, DARK_COLORS)):
        for name, role in CSS_VARIABLES.items():
            assert variables.get(name) == colours[role], name
        for name in ("fg", "muted", "bg", "panel", "border"):
            assert variables[f"--nb-{name}"] == colours[name], name
        assert set(variables) - set(CSS_VARIABLES) == {
            "--nb-fg",
            "--nb-muted",
            "--nb-bg",
            "--nb-panel",
            "--nb-border",
        }


def test_the_dark_values_are_switched_on_in_jupyterlab_dark_and_a_dark_exported_page() -> None:
    toggles = re.compile(r"--nb-unless-(dark|light):\s*(initial)?;")
    assert dict(toggles.findall(block("\n.nb-root"))) == {"dark": "initial", "light": ""}
    for selector in ('body[data-jp-theme-light="false"] .nb-root', "  body.nb-page .nb-root"):
        assert dict(toggles.findall(block(selector))) == {"dark": "", "light": "initial"}
    media = CSS.index("@media (prefers-color-scheme: dark)")
    assert media < CSS.index("  body.nb-page .nb-root {") < CSS.index("\n}\n", media)


def test_wait_stripes_are_the_palettes_colours() -> None:
    # the hatched waits mix their own colour (--nb-stripe) with transparency, in either theme,
    # the face as transparent as the static figures' swatch
    base = block("*/\n.nb-wait")  # the rule itself, not one it shares with the bars
    mixed = set(re.findall(r"color-mix\(in srgb, var\((--nb-[\w-]+)\)", base))
    assert mixed == {"--nb-stripe"} and "rgba(" not in base
    for selector, variable, swatch in (
        ("*/\n.nb-wait", "--nb-wait", "backoff"),
        ("\n.nb-wait.nb-server-wish", "--nb-wish", "retry_after"),
        ("\n.nb-wait.nb-paced", "--nb-paced", "paced"),
    ):
        rule = block(selector)
        assert f"--nb-stripe: var({variable});" in rule, selector
        assert f"--nb-stripe-text: var({variable}-text);" in rule, selector
        face = re.search(r"--nb-stripe-face: (\d+)%;", rule)
        assert face is not None and int(face.group(1)) / 100 == SWATCHES[swatch].face_alpha


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
