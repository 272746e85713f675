"""End to end: JupyterLab on 127.0.0.1, a notebook run in headless Chromium, the live widget.

A real JupyterLab server (no network: news, update checks and the PyPI extension manager are off,
and the page may only talk to 127.0.0.1) runs tests/notebooks/e2e.ipynb cell by cell, as a user
would with Shift+Enter. The agent runs in a background task (`agent.start`) against a mock server
that fails twice and then asks for a 30 s wait; the test watches the widget's status line change
while the run is in progress, runs another cell meanwhile (the kernel stays responsive), presses
the Stop button, and checks the run ended cancelled: in the widget and in the next cell, where
awaiting the handle raises `Aborted`. Then `%%agent` shows its widget under its own cell.

Chromium is Debian's (/usr/bin/chromium), never a Playwright download: when it is missing the
test fails and says so, because CI installs it. The screenshot goes to tests/artifacts/.
The server, the browser and the scenario are in jupyter_support.py, shared with Notebook 7's test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_support import NOTEBOOK, Server, drive, in_page, launch_chromium, serve

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Server]:
    yield from serve(tmp_path, "jupyterlab", "JupyterLab")


@pytest.fixture
def browser() -> Iterator[Any]:
    yield from launch_chromium("JupyterLab")


def kernel_ready(page: Any) -> None:
    # the kernel has started and is connected: the status bar says so
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").wait_for(timeout=60_000)


def test_widget_updates_live_and_stop_cancels_the_background_run(lab: Server, browser: Any) -> None:
    url = f"{lab.url}/lab/tree/{NOTEBOOK.name}?token={lab.token}"

    def steps(page: Any) -> None:
        elapsed = drive(lab, page, url, kernel_ready, "jupyterlab")
        print(f"JupyterLab scenario: {elapsed:.1f} s")

    in_page(browser, "jupyterlab", steps)
