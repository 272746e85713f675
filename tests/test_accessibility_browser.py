"""The timeline for readers who use a keyboard, a screen reader, or no colour: in Chromium.

The pages are the real exports (the widget's own module, driven by the export's small model),
and `nbagent demo`'s report.html: axe-core finds no WCAG 2.1 A/AA violation in the light or the
dark theme; Tab reaches the Stop button and each lane, the arrow keys each bar, Enter and Space
show a bar's details and Escape closes them; the live region speaks once per change and never
per streamed delta; and the demo's idle stretch is drawn shorter, where Python's axis says.
(The same checks run in JupyterLab and Notebook 7 through jupyter_support.drive.)
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from harness.axe import violations
from harness.timeline_script import ANNOUNCED, RUN, live_events, run_events
from jupyter_support import launch_chromium

from nbagent._axis import Axis
from nbagent.events import Event, TextDelta
from nbagent.notebook import TimelineState, TimelineWidget, export_html

pytestmark = pytest.mark.browser


def snapshot(events: list[Event], *, ahead: float = 0.0) -> dict[str, Any]:
    timeline = TimelineState(wall=lambda: time.time() + ahead)
    for event in events:
        timeline(event)
    return timeline.snapshot()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_chromium("accessibility")


@pytest.fixture
def open_page(browser: Any, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    contexts: list[Any] = []

    def open_file(path: Path, scheme: str = "light") -> Any:
        context = browser.new_context(viewport={"width": 1000, "height": 900}, color_scheme=scheme)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto(path.as_uri())
        page.wait_for_selector(".nb-root .nb-timeline")
        return page

    yield open_file
    for context in contexts:
        for page in context.pages:
            assert page.errors == [], page.errors
        context.close()


def export(tmp_path: Path, state: dict[str, Any], name: str = "run.html") -> Path:
    path = tmp_path / name
    export_html(state, path, title="nbagent run")
    return path


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_the_export(open_page: Any, tmp_path: Path, scheme: str) -> None:
    finished = open_page(export(tmp_path, snapshot(run_events())), scheme)
    dark = finished.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert dark == ("rgb(17, 17, 17)" if scheme == "dark" else "rgb(255, 255, 255)")
    assert violations(finished) == []
    finished.locator(".nb-bar.nb-tool-error").click()  # details open
    assert violations(finished) == []
    # a live run: countdown, Stop button, an active wait
    live = open_page(export(tmp_path, snapshot(live_events(), ahead=2.0), "live.html"), scheme)
    live.evaluate("() => window.nbagentModel.set('show_stop', true)")
    assert live.locator(".nb-stop").count() == 1
    assert violations(live) == []


def focused(page: Any) -> str:
    return str(
        page.evaluate(
            """() => {
              const n = document.activeElement;
              if (n.classList.contains("nb-bar")) {
                return `${n.closest(".nb-lane").dataset.lane}:${n.getAttribute("aria-label")}`;
              }
              return `${n.tagName.toLowerCase()}:${n.textContent.trim()}`;
            }"""
        )
    )


def test_the_keyboard_reaches_everything(open_page: Any, tmp_path: Path) -> None:
    page = open_page(export(tmp_path, snapshot(live_events(), ahead=30.0)))
    page.evaluate("() => window.nbagentModel.set('show_stop', true)")
    stops = []
    for _ in range(5):
        page.keyboard.press("Tab")
        stops.append(focused(page))
    assert stops == [
        "button:■ Stop",
        "request:request attempt 1 of 4: 503 service unavailable after 0.5 s; backoff 2.4 s",
        "compaction:compaction: 48,210 → 12,400 tokens in 1.4 s",
        "tool:tool read_file: returned an error after 0.8 s",
        "summary:Conversation (3 messages)",
    ]
    # the focus is visible
    page.keyboard.press("Shift+Tab")
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"

    # inside a lane the arrow keys move from bar to bar, Home and End to the ends
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")
    assert focused(page).startswith("request:request attempt 1 of 4: 503")
    names = [focused(page)]
    for _ in range(3):
        page.keyboard.press("ArrowRight")
        names.append(focused(page))
    assert len(set(names)) == 4  # the four request attempts, in time order
    assert [n.split(": ", 1)[1] for n in names] == [
        "503 service unavailable after 0.5 s; backoff 2.4 s",
        "ok after 0.7 s",
        "400 context window exceeded after 0.3 s; compacting",
        "429 too many requests after 0.3 s; the server's Retry-After 2 s",
    ]
    page.keyboard.press("ArrowRight")  # the last one: the focus stays
    assert focused(page) == names[-1]
    page.keyboard.press("Home")
    assert focused(page) == names[0]
    page.keyboard.press("End")
    assert focused(page) == names[-1]

    # Enter shows the details, Escape closes them and the focus stays on the bar
    page.keyboard.press("Home")
    page.keyboard.press("Enter")
    detail = page.locator(".nb-detail")
    assert detail.count() == 1
    assert "503" in detail.inner_text() and "from 0.0s to 0.5s" in detail.inner_text()
    bar = page.locator('.nb-lane-request .nb-bar[aria-expanded="true"]')
    assert bar.count() == 1
    assert focused(page) == names[0]
    page.keyboard.press("Escape")
    assert page.locator(".nb-detail").count() == 0
    assert focused(page) == names[0]
    page.keyboard.press("Space")
    assert page.locator(".nb-detail").count() == 1
    page.keyboard.press("Escape")

    # a new state (ten a second while a run streams) does not take the focus away; the lane
    # is entered where the reader left it
    page.keyboard.press("End")
    page.evaluate("s => window.nbagentModel.set('state', s)", snapshot(run_events()))
    assert focused(page).startswith("request:request attempt 1 of 4: 429")
    page.keyboard.press("Tab")
    page.keyboard.press("Shift+Tab")
    assert focused(page).startswith("request:request attempt 1 of 4: 429")


def test_bars_are_buttons_named_for_a_screen_reader(open_page: Any, tmp_path: Path) -> None:
    page = open_page(export(tmp_path, snapshot(run_events())))
    toolbar = page.get_by_role("toolbar", name="requests: 5 bars")
    assert toolbar.count() == 1
    name = "request attempt 1 of 4: 503 service unavailable after 0.5 s; backoff 2.4 s"
    assert toolbar.get_by_role("button", name=name, exact=True).count() == 1
    assert page.get_by_role("status").count() == 1  # one live region, not the status line


def coalesced_pushes(events: list[Event]) -> list[dict[str, Any]]:
    """The states a TimelineWidget pushes for `events` on its (injected) clock: deltas a
    millisecond apart, the other events a fifth of a second."""
    clock = [0.0]
    widget = TimelineWidget(now=lambda: clock[0], wall=lambda: 1_000.0)
    pushed: list[dict[str, Any]] = []
    widget.observe(lambda change: pushed.append(change["new"]), names="state")
    for event in events:
        clock[0] += 0.001 if isinstance(event, TextDelta) else 0.2
        widget(event)
    return pushed


def test_the_live_region_speaks_once_per_change(open_page: Any, tmp_path: Path) -> None:
    events = run_events()
    last_start = max(i for i, e in enumerate(events) if type(e).__name__ == "AttemptStarted")
    deltas = [
        TextDelta(run_id=RUN, time=108.7 + i * 1e-5, turn=2, attempt=2, text=f" w{i}")
        for i in range(20_000)
    ]
    stream = [*events[: last_start + 1], *deltas, *events[last_start + 1 :]]
    pushes = coalesced_pushes(stream)
    assert len(pushes) > 150  # the stream redraws the widget, about ten times a second
    page = open_page(export(tmp_path, TimelineState().snapshot()))
    said = page.evaluate(
        """async (states) => {
          const live = document.querySelector(".nb-live");
          const said = [];
          new MutationObserver(() => said.push(live.textContent)).observe(live, {
            childList: true, characterData: true, subtree: true,
          });
          for (const s of states) {
            window.nbagentModel.set("state", s);
            await new Promise((r) => setTimeout(r, 0));
          }
          return said;
        }""",
        pushes,
    )
    assert said == ANNOUNCED
    assert page.locator(".nb-live").get_attribute("aria-live") == "polite"

    # two changes in one push (the widget coalesces): both said, in one announcement
    state = TimelineState()
    for event in live_events()[:-6]:
        state(event)
    before = state.snapshot()
    page.evaluate("s => window.nbagentModel.set('state', s)", before)
    for event in live_events()[-6:]:  # the compaction ends, then a 429 asks to wait
        state(event)
    page.evaluate("s => window.nbagentModel.set('state', s)", state.snapshot())
    assert page.locator(".nb-live").inner_text() == ". ".join(ANNOUNCED[2:4])


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nbagent.demo._command import run_demo

    out = tmp_path_factory.mktemp("demo") / "demo"
    # in a thread of its own: this one runs Playwright's event loop
    with ThreadPoolExecutor(1) as pool:
        pool.submit(run_demo, out, stream=io.StringIO()).result()
    return out / "report.html"


def embedded_state(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    match = re.search(r'id="nbagent-state">\n(.*?)\n</script>', text, re.S)
    assert match is not None
    state: dict[str, Any] = json.loads(match.group(1))
    return state


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_the_demo_report(
    open_page: Any, demo_report: Path, scheme: str
) -> None:
    page = open_page(demo_report, scheme)
    assert violations(page) == []


def test_the_demo_reports_axis_draws_its_idle_stretch_shorter(
    open_page: Any, demo_report: Path
) -> None:
    state = embedded_state(demo_report)
    axis = state["axis"]
    shared = Axis(tuple(axis["times"]), tuple(axis["positions"]))
    wish = next(w for w in state["waits"] if w["server_wish"])  # the first run's Retry-After
    t0 = axis["t0"]
    assert any(a <= wish["start"] - t0 + 1e-6 and b > wish["start"] - t0 for a, b in axis["breaks"])

    page = open_page(demo_report)
    # the report draws a row per prompt: every track has the same width
    track = page.locator('.nb-lane[data-lane="request"] .nb-track').first.bounding_box()
    wait = page.locator(".nb-wait.nb-server-wish").first.bounding_box()
    mark = page.locator(".nb-break").first.bounding_box()
    assert wait["x"] <= mark["x"] + mark["width"] / 2 <= wait["x"] + wait["width"]
    # drawn shorter than a linear axis would draw it
    seconds_share = (wish["end"] - wish["start"]) / shared.span
    assert wait["width"] / track["width"] < 0.9 * seconds_share
    # and every bar sits where Python's mapping puts it (a pixel of rounding either way)
    span = shared.width * 1.02
    boxes = page.evaluate(
        """() => [...document.querySelectorAll(".nb-bar")].map((n) => {
          const r = n.getBoundingClientRect();
          const t = n.closest(".nb-track").getBoundingClientRect();
          return [Number(n.dataset.id), r.left - t.left];
        })"""
    )
    bars = {b["id"]: b for b in state["bars"]}
    assert len(boxes) == len(bars)
    for bar_id, left in boxes:
        want = shared.at(bars[bar_id]["start"] - t0) / span * track["width"]
        assert abs(left - want) <= 1.5, (bars[bar_id]["aria"], left, want)
    # the true times are still what hover and the details say
    first = page.locator(".nb-bar").first
    assert "at 0.0s–" in (first.get_attribute("title") or "")
