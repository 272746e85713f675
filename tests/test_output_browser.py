"""A reask in Chromium: the exported timeline draws it with its own glyph and dotted pattern,
the keyboard reaches it and opens its details (the errors sent back), axe-core finds no WCAG
2.1 A/AA violation in either theme, and the legend names it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_support import launch_chromium
from test_output_view import reasked_run

from nbagent._palette import REASK_GLYPH
from nbagent.notebook import export_html

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_chromium("reask")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_reask_is_marked_reachable_and_explained(
    browser: Any, tmp_path: Path, scheme: str
) -> None:
    from harness.axe import violations

    _, state = reasked_run()
    path = tmp_path / "reask.html"
    export_html(state.snapshot(), path, title="a reask")
    context = browser.new_context(viewport={"width": 1000, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".nb-root .nb-timeline")
        bar = page.locator(".nb-bar.nb-reask")
        assert bar.count() == 1
        assert REASK_GLYPH in bar.inner_text()
        assert "asked again with the errors (reask)" in (bar.get_attribute("aria-label") or "")
        dotted = bar.evaluate("b => getComputedStyle(b).backgroundImage")
        assert "radial-gradient" in dotted  # the dots, not the failure's cross
        assert "reasked" in page.locator(".nb-legend").inner_text()
        assert violations(page) == []
        bar.focus()
        page.keyboard.press("Enter")
        details = page.locator(".nb-detail .nb-output-errors")
        assert "name: Input should be a valid string" in details.inner_text()
        assert violations(page) == []
        assert errors == []
    finally:
        context.close()
