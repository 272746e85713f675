"""The teacher's dashboard in Chromium: it updates live, its controls work from the keyboard,
names are shown as text, and axe-core finds no WCAG 2.1 A/AA violation (light and dark)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness.axe import violations
from jupyter_support import launch_chromium

from nbagent.classroom import Classroom, join

pytestmark = pytest.mark.browser

EVIL = '<img src=x onerror="window.pwned=1">'


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_chromium("classroom dashboard")


@pytest.fixture
def room() -> Iterator[Classroom]:
    with Classroom(capacity_rps=50, seed=2) as opened:
        yield opened


def open_dashboard(browser: Any, room: Classroom, scheme: str = "light") -> Any:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.goto(room.teacher_url)
    page.wait_for_function("() => document.body.dataset.version !== undefined")
    return page


def total(page: Any) -> int:
    return int(page.evaluate("() => Number(document.body.dataset.total)"))


def test_it_updates_live_and_shows_names_as_text(browser: Any, room: Classroom) -> None:
    page = open_dashboard(browser, room)
    assert total(page) == 0
    seat = join(room.url, code=room.code, name=EVIL)
    agent = seat.agent()
    agent.run_sync("What is 2 + 2?")
    agent.run_sync("And 3 + 3?")
    page.wait_for_function("() => Number(document.body.dataset.total) === 2")
    row = page.locator("#students tbody tr")
    assert row.count() == 1
    assert row.locator("th").inner_text() == EVIL
    assert page.evaluate("() => window.pwned") is None
    assert page.locator("#students img").count() == 0
    assert "1 student, 2 requests" in page.locator("#summary").inner_text()
    assert page.locator("#live").inner_text() == "live"
    assert page.errors == []


def test_the_controls_work_from_the_keyboard(browser: Any, room: Classroom) -> None:
    page = open_dashboard(browser, room)
    page.locator("#scenario").focus()
    page.keyboard.press("ArrowDown")  # herd -> wall
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "start"
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.getElementById('message').textContent.startsWith('Started')"
    )
    assert page.locator("#message").inner_text() == "Started wall for 20 s."
    assert room.room.active() is not None and room.room.active().name == "wall"  # type: ignore[union-attr]
    page.wait_for_function("() => document.getElementById('summary').textContent.includes('wall')")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "stop"
    page.keyboard.press("Space")
    page.wait_for_function(
        "() => document.getElementById('message').textContent === 'Stopped wall.'"
    )
    assert room.room.active() is None
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "capacity"
    page.keyboard.press("Control+A")
    page.keyboard.type("7")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.getElementById('message').textContent === 'Capacity is now 7 per second.'"
    )
    assert room.capacity.rps == 7.0
    page.locator("#capacity").fill("-3")
    page.locator("#set-capacity").press("Enter")
    page.wait_for_function(
        "() => document.getElementById('message').textContent.startsWith('capacity must be')"
    )
    assert room.capacity.rps == 7.0
    assert page.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation(browser: Any, room: Classroom, scheme: str) -> None:
    for name in ("ana", "ben"):
        join(room.url, code=room.code, name=name).agent().run_sync("What is 2 + 2?")
    room.scenario("herd")
    page = open_dashboard(browser, room, scheme)
    page.wait_for_function("() => document.querySelectorAll('#students tbody tr').length === 2")
    page.locator("#start").focus()
    assert violations(page) == []
