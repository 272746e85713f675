"""A wide DataFrame on a notebook page keeps its last columns in sight: under the notebook CSS
mkdocs-jupyter ships (every table at its max-content width) and the site's own
docs/stylesheets/extra.css, a frame of long texts wraps them within its cell instead of running
past it. Drawn in Chromium, as notebook 12's joined table is on the site."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")


def notebook_css() -> str:
    import mkdocs_jupyter

    path = Path(mkdocs_jupyter.__file__).parent / "templates/mkdocs_html/assets/index.css"
    return path.read_text(encoding="utf-8")


def measure(page_html: str) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.set_content(page_html)
            return dict(
                page.evaluate(
                    """() => {
                      const out = document.querySelector('.jp-OutputArea-output');
                      const heads = [...out.querySelectorAll('thead th')];
                      const edge = out.getBoundingClientRect().right;
                      return {
                        hidden: heads.filter(h => h.getBoundingClientRect().right > edge + 0.5)
                                     .map(h => h.textContent),
                        scrolls: out.scrollWidth > out.clientWidth,
                      };
                    }"""
                )
            )
        finally:
            browser.close()


def test_a_frame_of_long_texts_shows_its_last_columns_within_the_cell() -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium", pytrace=False)
    text = "Terrible blender, broke after a week and the lid leaks, and support never answered."
    frame = pd.DataFrame(
        {
            "text": [text] * 3,
            "sentiment": ["negative"] * 3,
            "stars": [1] * 3,
            "summary": [text] * 3,
            "reasks": [0, 1, 0],
            "error": ["<NA>", "<NA>", "OutputTruncated"],
        }
    )
    extra = (ROOT / "docs" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    page = (
        f"<html><head><style>{notebook_css()}</style><style>{extra}</style></head><body>"
        '<div class="jupyter-wrapper"><div style="width:600px">'
        '<div class="jp-RenderedHTMLCommon jp-RenderedHTML jp-OutputArea-output">'
        f"{frame.to_html(classes='dataframe')}</div></div></div></body></html>"
    )
    seen = measure(page)
    assert seen == {"hidden": [], "scrolls": False}
    # without the site's rule the notebook CSS runs the table past the cell: reasks, error hidden
    seen = measure(page.replace(f"<style>{extra}</style>", ""))
    assert seen["scrolls"] and {"reasks", "error"} <= set(seen["hidden"])
