"""End to end: Notebook 7 on 127.0.0.1, a notebook run in headless Chromium, the live widget.

The same scenario as test_jupyterlab_e2e.py (see jupyter_support.drive), in Jupyter Notebook 7's
single-document page (/notebooks/e2e.ipynb), with only what `pip install` put in the environment:
the anywidget front end renders the timeline under the `agent.start` cell, its status line changes
while the background run goes on, another cell runs meanwhile, the Stop button ends the run
cancelled (the next cell prints `Aborted`), and `%%agent` shows its widget under its own cell.
The server binds 127.0.0.1 only and fetches nothing; the page talks to nothing but it.

Chromium is Debian's (/usr/bin/chromium), never a Playwright download: when it is missing the
test fails and says so, because CI installs it. The screenshot is tests/artifacts/notebook7.png.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import notebook
import pytest
from jupyter_support import NOTEBOOK, Server, drive, in_page, launch_chromium, serve

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow]


def notebook7_startup_race(error: str) -> bool:
    """Notebook 7.6.5 (JupyterLab 4.6 components) throws this on every load of a notebook page,
    before any cell runs, with the widget extensions disabled too: the shortcuts plugin's
    `pluginChanged` listener runs for @jupyterlab/docmanager-extension:plugin before the
    registry holds @jupyterlab/shortcuts-extension:shortcuts, and reads its `.schema`."""
    first, _, stack = error.partition("\n")
    return (
        first == "Cannot read properties of undefined (reading 'schema')"
        and "/static/notebook/notebook_core." in stack
    )


@pytest.fixture
def nb7(tmp_path: Path) -> Iterator[Server]:
    assert notebook.__version__.startswith("7."), notebook.__version__
    yield from serve(tmp_path, "notebook", "Notebook 7")


@pytest.fixture
def browser() -> Iterator[Any]:
    yield from launch_chromium("Notebook 7")


def test_notebook7_widget_updates_live_and_stop_cancels_the_background_run(
    nb7: Server, browser: Any
) -> None:
    url = f"{nb7.url}/notebooks/{NOTEBOOK.name}?token={nb7.token}"

    def kernel_ready(page: Any) -> None:
        # Notebook 7's page, not a redirect to JupyterLab
        page.locator("#jp-NotebookLogo").wait_for()
        assert f"/notebooks/{NOTEBOOK.name}" in page.url, page.url
        # Notebook 7 has no kernel status bar, and its toolbar's execution indicator says
        # "idle" before a kernel exists; the server knows when the page's websocket is up.
        deadline = time.monotonic() + 60
        while not any(
            k["connections"] >= 1 and k["execution_state"] == "idle"
            for k in nb7.get("/api/kernels")
        ):
            assert time.monotonic() < deadline, "no kernel connected to the page in 60 s"
            time.sleep(0.1)
        page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for()

    def steps(page: Any) -> None:
        elapsed = drive(nb7, page, url, kernel_ready, "notebook7", notebook7_startup_race)
        print(f"Notebook 7 scenario: {elapsed:.1f} s")

    in_page(browser, "notebook7", steps)
