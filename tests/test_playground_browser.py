"""The policy playground in JupyterLab, in headless Chromium: moving a slider changes the numbers.

A notebook of one cell (`playground(clients=20)`) is written into a real JupyterLab server's
folder (the harness of test_jupyterlab_e2e.py: 127.0.0.1 only, nothing fetched from the
network) and run with Shift+Enter. The test moves sliders with the keyboard, as a reader might,
and waits for the kernel's recomputation to reach the page; axe-core then checks it (WCAG 2.1
A/AA) in the light and the dark theme.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_support import (
    Server,
    accessible_in_both_themes,
    in_page,
    launch_chromium,
    serve,
    wait_text,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow]

CELL = "from nbagent.notebook import playground\n\nplayground(clients=20)"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Server]:
    yield from serve(tmp_path, "jupyterlab", "JupyterLab")


@pytest.fixture
def browser() -> Iterator[Any]:
    yield from launch_chromium("playground")


def write_notebook(path: Path) -> None:
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "playground",
                "metadata": {},
                "outputs": [],
                "source": CELL,
            }
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook), encoding="utf-8")


def test_moving_a_slider_changes_the_numbers_shown(lab: Server, browser: Any) -> None:
    write_notebook(lab.root / "playground.ipynb")
    url = f"{lab.url}/lab/tree/playground.ipynb?token={lab.token}"

    def steps(page: Any) -> None:
        errors: list[str] = []
        requests: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", lambda req: requests.append(req.url))
        page.set_default_timeout(60_000)
        page.goto(url)
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        page.locator(".jp-StatusBar-TextItem", has_text="| Idle").wait_for(timeout=60_000)
        for known in [e for e in errors if "ResizeObserver" in e]:
            errors.remove(known)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")

        calls = cell.locator(".nb-play-calls")
        gave_up = cell.locator(".nb-play-gave-up")
        calls.wait_for(timeout=60_000)  # the widget rendered the first computation
        before = calls.inner_text()
        assert gave_up.inner_text().endswith("of 20")

        # more clients: the keyboard moves the slider, the kernel recomputes, the page follows
        handle = cell.locator(".nb-play-clients .noUi-handle")
        handle.focus()
        for _ in range(10):
            page.keyboard.press("ArrowRight")
        wait_text(gave_up, lambda text: text.endswith("of 30"), 30)
        after = wait_text(calls, lambda text: text != before, 30)
        assert int(after.replace(",", "")) > int(before.replace(",", ""))

        # one attempt only: every client that collided gives up at once
        attempts = cell.locator(".nb-play-attempts .noUi-handle")
        attempts.focus()
        page.keyboard.press("Home")
        wait_text(gave_up, lambda text: text == "29 of 30", 30)
        assert calls.inner_text() == "30"

        # the pictures say in words what they show; axe finds nothing, light or dark
        timeline = cell.locator("img[alt^='Timeline of 30 clients: 30 calls']")
        assert timeline.count() == 1, cell.locator("img").evaluate_all("ns => ns.map(n => n.alt)")
        accessible_in_both_themes(page, ".jp-OutputArea-output:has(.nb-playground)")
        cell.screenshot(path=str(Path(__file__).parent / "artifacts" / "playground.png"))
        assert errors == [], errors
        remote = [u for u in requests if not u.startswith((f"{lab.url}/", "data:", "blob:"))]
        assert remote == [], remote

    (Path(__file__).parent / "artifacts").mkdir(exist_ok=True)
    in_page(browser, "playground", steps)
