"""The palette reads for everyone: colour-blind safe, enough contrast, failures marked twice.

About one man in twelve cannot tell a green "ok" from a red "failed". Here the palette of
`nbagent._palette` (light and dark) is put through the simulations of protanopia, deuteranopia
and tritanopia of Machado, Oliveira & Fernandes (2009, severity 1.0, applied to linear sRGB as
colorspacious and colour-science do) and every pair of the roles a reader must tell apart must
stay at least 10 apart in CIEDE2000 (Sharma, Wu & Dalal 2005), in normal vision too. Both are
implemented here from the published formulas and checked against the paper's own test pairs.
Contrast follows WCAG 2.1: 4.5:1 for words, 3:1 for the shapes a chart is read from.
Finally a failed bar differs from an ok one by a pattern as well as a colour, in the PNG.
"""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from matplotlib.colors import to_hex, to_rgb

from nbagent._palette import COLORS, DARK_COLORS, DISTINCT_ROLES, FAILURE_MARK, SWATCHES

Vector = tuple[float, float, float]

# Machado et al. 2009, table of severity 1.0 (the paper's supplementary matrices)
MACHADO: dict[str, tuple[Vector, Vector, Vector]] = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}
SRGB_TO_XYZ = (
    (0.4124564, 0.3575761, 0.1804375),
    (0.2126729, 0.7151522, 0.0721750),
    (0.0193339, 0.1191920, 0.9503041),
)
D65 = (0.95047, 1.0, 1.08883)
THEMES = {"light": COLORS, "dark": DARK_COLORS}


def linear(hex_colour: str) -> Vector:
    r, g, b = (
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(hex_colour)
    )
    return r, g, b


def times(m: tuple[Vector, Vector, Vector], v: Vector) -> Vector:
    x, y, z = (sum(a * b for a, b in zip(row, v, strict=True)) for row in m)
    return x, y, z


def lab(rgb_linear: Vector) -> Vector:
    xyz = times(SRGB_TO_XYZ, rgb_linear)
    f = [
        math.copysign(abs(t) ** (1 / 3), t)
        if t > (6 / 29) ** 3
        else t / (3 * (6 / 29) ** 2) + 4 / 29
        for t in (v / w for v, w in zip(xyz, D65, strict=True))
    ]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def seen(hex_colour: str, vision: str) -> Vector:
    """CIELAB of the colour as a person with `vision` sees it."""
    rgb = linear(hex_colour)
    if vision != "normal":
        r, g, b = (min(1.0, max(0.0, c)) for c in times(MACHADO[vision], rgb))
        rgb = (r, g, b)
    return lab(rgb)


def ciede2000(lab1: Vector, lab2: Vector) -> float:
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360
    h2p = math.degrees(math.atan2(b2, a2p)) % 360
    dl, dc = l2 - l1, c2p - c1p
    dh = 0.0
    if c1p * c2p:
        dh = h2p - h1p
        dh = dh - 360 if dh > 180 else dh + 360 if dh < -180 else dh
    dh_big = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_mean, cp_mean = (l1 + l2) / 2, (c1p + c2p) / 2
    if not c1p * c2p:
        h_mean = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_mean = (h1p + h2p) / 2
    else:
        h_mean = (h1p + h2p + (360 if h1p + h2p < 360 else -360)) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(h_mean - 30))
        + 0.24 * math.cos(math.radians(2 * h_mean))
        + 0.32 * math.cos(math.radians(3 * h_mean + 6))
        - 0.20 * math.cos(math.radians(4 * h_mean - 63))
    )
    d_theta = 30 * math.exp(-(((h_mean - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(cp_mean**7 / (cp_mean**7 + 25**7))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / math.sqrt(20 + (l_mean - 50) ** 2)
    s_c = 1 + 0.045 * cp_mean
    s_h = 1 + 0.015 * cp_mean * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt(
        (dl / s_l) ** 2 + (dc / s_c) ** 2 + (dh_big / s_h) ** 2 + r_t * (dc / s_c) * (dh_big / s_h)
    )


def contrast(a: str, b: str) -> float:
    def luminance(c: str) -> float:
        r, g, bl = linear(c)
        return 0.2126 * r + 0.7152 * g + 0.0722 * bl

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize(
    ("lab1", "lab2", "expected"),
    [  # pairs 1, 17 and 25 of Sharma, Wu & Dalal's CIEDE2000 test data
        ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
        ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ],
)
def test_ciede2000_matches_the_published_test_data(
    lab1: Vector, lab2: Vector, expected: float
) -> None:
    assert ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)


def test_the_simulation_confuses_what_it_should() -> None:
    # the classic confusion: a green and a red of similar lightness nearly merge for a
    # deuteranope, and stay far apart in normal vision
    green, red = "#4c9a2a", "#b5651d"
    assert ciede2000(seen(green, "normal"), seen(red, "normal")) > 25
    assert ciede2000(seen(green, "deuteranopia"), seen(red, "deuteranopia")) < 8
    assert seen("#808080", "protanopia") == pytest.approx(seen("#808080", "normal"), abs=0.5)


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("vision", ["normal", "protanopia", "deuteranopia", "tritanopia"])
def test_every_pair_of_roles_stays_apart(theme: str, vision: str) -> None:
    colours = THEMES[theme]
    close = [
        (a, b, round(d, 1))
        for a, b in itertools.combinations(DISTINCT_ROLES, 2)
        if (d := ciede2000(seen(colours[a], vision), seen(colours[b], vision))) < 10
    ]
    assert close == [], f"{theme}, {vision}: {close}"


@pytest.mark.parametrize("theme", THEMES)
def test_shapes_and_words_have_the_contrast_wcag_asks(theme: str) -> None:
    c = THEMES[theme]
    low: list[tuple[str, str, float]] = []

    def need(fg: str, bg: str, ratio: float) -> None:
        if (found := contrast(c[fg], c[bg])) < ratio:
            low.append((fg, bg, round(found, 2)))

    for fill in ("ok", "error", "cancelled", "running", "compaction", "tool_ok", "tool_error"):
        need(fill, "panel", 3.0)  # a bar against its lane (WCAG 1.4.11)
        need(f"{fill}_ink", fill, 4.5)  # the label written on it
    for edge in ("backoff", "retry_after", "paced"):
        need(edge, "panel", 3.0)  # a wait's dashed outline
    words = ("fg", "muted", "ok_dark", "error_dark", "warning")
    for text in (*words, "backoff_text", "retry_after_text", "compaction_text", "paced_text"):
        need(text, "bg", 4.5)
        need(text, "panel", 4.5)
    assert low == [], low


def test_both_themes_name_the_same_roles() -> None:
    assert set(COLORS) == set(DARK_COLORS)
    assert all(to_hex(v) == v for v in (*COLORS.values(), *DARK_COLORS.values()))


def test_failures_are_marked_by_a_pattern_not_only_a_colour() -> None:
    assert SWATCHES["failed"].mark == SWATCHES["tool_error"].mark == FAILURE_MARK != ""
    assert SWATCHES["ok"].mark == SWATCHES["tool_ok"].mark == ""


def test_the_png_crosses_out_failed_bars() -> None:
    from matplotlib.collections import PolyCollection

    from nbagent.analysis import plot_timeline

    df = pd.DataFrame(
        {
            "run_id": ["r"] * 3,
            "phase": ["request", "request", "tool"],
            "attempt": [1, 2, pd.NA],
            "outcome": ["error", "ok", "error"],
            "status_code": [503, pd.NA, pd.NA],
            "action": ["retry", "none", "tool_result"],
            "started_at": [0.0, 1.5, 2.1],
            "ended_at": [0.4, 2.0, 2.3],
            "duration_s": [0.4, 0.5, 0.2],
            "delay_s": [1.1, pd.NA, pd.NA],
            "tool_name": [pd.NA, pd.NA, "calculator"],
        }
    )
    fig = plot_timeline(df)
    hatches = {
        to_hex(tuple(coll.get_facecolor()[0])): coll.get_hatch()
        for coll in fig.axes[0].collections
        if isinstance(coll, PolyCollection)
    }
    assert hatches[COLORS["error"]] == FAILURE_MARK
    assert hatches[COLORS["tool_error"]] == FAILURE_MARK
    assert not hatches[COLORS["ok"]]
