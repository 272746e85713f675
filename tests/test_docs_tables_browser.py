"""A wide DataFrame on a notebook page keeps its last columns in sight: under the notebook CSS
mkdocs-jupyter ships (every table at its max-content width) and the site's own
docs/stylesheets/extra.css, a frame of long texts wraps them within its cell instead of running
past it; and notebook 13's tables of batch ids fit it. Drawn in Chromium, as the tables are on
the site."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_notebook_13_story import NOTEBOOK, code_cells

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
EXTRA_CSS = ROOT / "docs" / "stylesheets" / "extra.css"


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


def cell_page(table_html: str) -> str:
    """A notebook output cell 600 px wide holding `table_html`, under the notebook CSS and the
    site's."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium", pytrace=False)
    extra = EXTRA_CSS.read_text(encoding="utf-8")
    return (
        f"<html><head><style>{notebook_css()}</style><style>{extra}</style></head><body>"
        '<div class="jupyter-wrapper"><div style="width:600px">'
        '<div class="jp-RenderedHTMLCommon jp-RenderedHTML jp-OutputArea-output">'
        f"{table_html}</div></div></div></body></html>"
    )


def test_a_frame_of_long_texts_shows_its_last_columns_within_the_cell() -> None:
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
    page = cell_page(frame.to_html(classes="dataframe"))
    seen = measure(page)
    assert seen == {"hidden": [], "scrolls": False}
    # without the site's rule the notebook CSS runs the table past the cell: reasks, error hidden
    seen = measure(page.replace(f"<style>{EXTRA_CSS.read_text(encoding='utf-8')}</style>", ""))
    assert seen["scrolls"] and {"reasks", "error"} <= set(seen["hidden"])


def test_notebook_13s_tables_of_batch_ids_fit_the_cell() -> None:
    # its setup, its first batch and its structured one, then each cell showing batch ids, as
    # the notebook displays the frame its last line gives (a batch id is one unbreakable word)
    cells = code_cells()
    first = next(c for c in cells if "retry=retry" in c)
    labelled = next(c for c in cells if "class Label" in c)
    ns: dict[str, Any] = {}
    shown: dict[str, str] = {}
    try:
        for cell in (cells[0], first, labelled):  # not under this module's __future__ import
            exec(compile(cell, str(NOTEBOOK), "exec", dont_inherit=True), ns)
        for cell in (c for c in cells if re.search(r'"batch(_id)?"', c)):
            tree = ast.parse(cell)
            last = tree.body.pop()
            assert isinstance(last, ast.Expr), cell
            exec(compile(tree, str(NOTEBOOK), "exec", dont_inherit=True), ns)
            frame = eval(compile(ast.Expression(last.value), str(NOTEBOOK), "eval"), ns)
            shown[cell] = frame._repr_html_()
    finally:
        if "server" in ns:
            ns["server"].stop()
    assert len(shown) == 3  # the first batch's attempts, its count by batch, the structured one's
    for cell, table in shown.items():
        assert measure(cell_page(table)) == {"hidden": [], "scrolls": False}, cell
