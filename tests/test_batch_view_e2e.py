"""End to end: the live batch view in JupyterLab, in headless Chromium.

tests/notebooks/batch_view.ipynb starts a batch of 30 prompts in the background
(`nbagent.batch.start`) against a mock server that admits 2 requests a second. The test watches
the view's "done" count rise while the agents run (pushed from the kernel, about ten times a
second at most), presses its Stop button, and checks in the next cell that the batch returned
every row, the unfinished ones cancelled; axe-core checks the view (WCAG 2.1 A/AA) in the light
and the dark theme once stopped. Same harness as the widget's test (jupyter_support).
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_support import (
    ARTIFACTS,
    Server,
    accessible_in_both_themes,
    in_page,
    launch_chromium,
    serve,
    wait_text,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow]

NOTEBOOK = Path(__file__).parent / "notebooks" / "batch_view.ipynb"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Server]:
    for server in serve(tmp_path, "jupyterlab", "JupyterLab"):
        shutil.copy(NOTEBOOK, server.root / NOTEBOOK.name)
        yield server


@pytest.fixture
def browser() -> Iterator[Any]:
    yield from launch_chromium("JupyterLab")


def _done(text: str) -> int:
    m = re.search(r"done (\d+)/30", text)
    return int(m.group(1)) if m else -1


def test_the_batch_view_updates_while_agents_run_and_stops(lab: Server, browser: Any) -> None:
    url = f"{lab.url}/lab/tree/{NOTEBOOK.name}?token={lab.token}"

    def steps(page: Any) -> None:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_default_timeout(30_000)
        page.goto(url)
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        page.locator(".jp-StatusBar-TextItem", has_text="| Idle").wait_for(timeout=60_000)
        cells = page.locator(".jp-Notebook .jp-Cell")

        def run(index: int) -> Any:
            cell = cells.nth(index)
            cell.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
            return cell

        setup = run(0)
        wait_text(setup.locator(".jp-OutputArea"), lambda t: "ready" in t, 60)
        started = run(1)
        view = started.locator(".nbb-root")
        view.wait_for(timeout=30_000)
        done = view.locator('[data-k="done"]')
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            n = _done(done.inner_text())
            if not seen or seen[-1] != n:
                seen.append(n)
            if n >= 8:
                break
            time.sleep(0.05)
        print("done counts while running:", seen)
        assert len([n for n in seen if 0 < n < 30]) >= 3, seen  # it moved, step by step
        assert seen == sorted(seen), seen
        assert view.locator(".nbb-lane").count() == 30  # a lane per agent
        assert view.locator('.nbb-lane[data-state="ok"]').count() >= 1
        view.locator("button.nbb-stop").click()
        view.locator("button.nbb-stop").wait_for(state="detached", timeout=10_000)
        stopped = _done(done.inner_text())
        assert 8 <= stopped < 30 or stopped == 30, stopped
        # axe-core finds nothing in the view, light or dark
        accessible_in_both_themes(page, ".jp-OutputArea-output:has(.nbb-root)")
        ARTIFACTS.mkdir(exist_ok=True)
        started.screenshot(path=str(ARTIFACTS / "batch-view.png"))

        after = run(2)
        out = wait_text(after.locator(".jp-OutputArea"), lambda t: "rows=" in t, 30)
        assert "cancelled=True rows=30" in out, out
        assert errors == [], errors

    in_page(browser, "jupyterlab-batch", steps)
