"""The timeline's ES module, rendered by headless Chromium from the exported HTML page.

The page is the real export (the module inlined, driven by its small fake model), loaded from a
file:// URL; every request the page makes is recorded and must stay off the network. Chromium
is Debian's (/usr/bin/chromium), never a Playwright download: when it is missing the test fails
and says so, because CI installs it.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.timeline_script import TOOL_ERROR, live_events, run_events
from matplotlib.colors import to_rgb

from nbagent._core._budget import Usage
from nbagent._palette import COLORS
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    RetryScheduled,
    RunFinished,
    RunStarted,
)
from nbagent.notebook import TimelineState, export_html

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).parent / "artifacts"
COUNTDOWN = re.compile(r"retrying in (\d+(?:\.\d)?)s")


def snapshot(events: list[Any], *, ahead: float = 0.0) -> dict[str, Any]:
    """The state after `events`, as if the last one happened `ahead` seconds from now."""
    timeline = TimelineState(wall=lambda: time.time() + ahead)
    for event in events:
        timeline(event)
    return timeline.snapshot()


def rgb(css: str) -> tuple[int, int, int]:
    match = re.match(r"rgba?\((\d+), (\d+), (\d+)", css)
    assert match is not None, css
    r, g, b = (int(x) for x in match.groups())
    return r, g, b


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); "
            "the widget's browser tests need it and never download a browser",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def open_page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    pages: list[Any] = []

    def open_state(state: dict[str, Any], name: str = "run.html") -> Any:
        path = tmp_path / name
        export_html(state, path, title="nbagent test run")
        page = browser.new_page(viewport={"width": 1000, "height": 900}, device_scale_factor=2)
        pages.append(page)
        page.errors = []
        page.requests = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.on(
            "console",
            lambda msg: page.errors.append(msg.text) if msg.type == "error" else None,
        )
        page.on("request", lambda req: page.requests.append(req.url))
        page.goto(path.as_uri())
        page.wait_for_selector(".nb-root .nb-timeline")
        return page

    yield open_state
    for page in pages:
        assert page.errors == [], page.errors
        assert all(url.startswith("file://") for url in page.requests), page.requests
        page.close()


def test_lanes_bars_and_colours(open_page: Any) -> None:
    page = open_page(snapshot(run_events()))
    for lane in ("request", "compaction", "tool"):
        assert page.locator(f'.nb-lane[data-lane="{lane}"] .nb-track').count() == 1
    assert page.locator('.nb-lane[data-lane="request"] .nb-bar.nb-error').count() == 3
    assert page.locator('.nb-lane[data-lane="request"] .nb-bar.nb-ok').count() == 2
    assert page.locator(".nb-track .nb-wait").count() == 2
    assert page.locator(".nb-track .nb-wait.nb-server-wish").count() == 1

    ok = page.locator(".nb-bar.nb-tool-ok")
    error = page.locator(".nb-bar.nb-tool-error")
    assert ok.count() == 1 and error.count() == 1
    assert "nb-ok" in (ok.get_attribute("class") or "")
    assert "nb-error" in (error.get_attribute("class") or "")
    # a tool call's colour is its own, not the request's beside it (the PNG's too)
    request_ok = page.locator('.nb-lane[data-lane="request"] .nb-bar.nb-ok').first
    request_error = page.locator('.nb-lane[data-lane="request"] .nb-bar.nb-error').first
    painted = {
        name: rgb(bar.evaluate("n => getComputedStyle(n).backgroundColor"))
        for name, bar in (("tool_ok", ok), ("tool_error", error), ("ok", request_ok))
    }
    painted["error"] = rgb(request_error.evaluate("n => getComputedStyle(n).backgroundColor"))
    for role, colour in painted.items():
        assert colour == tuple(round(c * 255) for c in to_rgb(COLORS[role])), (role, colour)
    assert painted["tool_ok"] != painted["ok"] and painted["tool_error"] != painted["error"]
    # and crossed out, so that it differs from an ok bar by more than its colour
    assert "repeating-linear-gradient" in error.evaluate("n => getComputedStyle(n).backgroundImage")
    assert ok.evaluate("n => getComputedStyle(n).backgroundImage") == "none"
    assert TOOL_ERROR in (error.get_attribute("title") or "")

    compaction = page.locator(".nb-bar.nb-kind-compaction")
    assert "48,210 → 12,400 tokens" in compaction.inner_text()
    assert page.locator(".nb-status").inner_text() == "done: end_turn"
    summary = page.locator(".nb-summary").inner_text()
    assert "6 (3 failed)" in summary and "14,100 in" in summary


def test_discarded_text_is_struck_through_and_tool_errors_are_red(open_page: Any) -> None:
    page = open_page(snapshot(run_events()))
    struck = page.locator(".nb-conv s.nb-discarded")
    assert struck.count() == 1
    assert struck.inner_text() == "Hel"
    result = page.locator(".nb-result-error")
    assert result.count() == 1
    assert TOOL_ERROR in result.inner_text()
    assert page.locator(".nb-result-ok").count() == 1


def test_clicking_a_failed_tool_shows_its_error(open_page: Any) -> None:
    page = open_page(snapshot(run_events()))
    assert page.locator(".nb-detail").count() == 0
    page.locator(".nb-bar.nb-tool-error").click()
    detail = page.locator(".nb-detail")
    assert detail.count() == 1
    assert "tool error" in detail.inner_text()
    assert page.locator(".nb-detail-text").inner_text() == TOOL_ERROR
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".nb-root").screenshot(path=str(ARTIFACTS / "widget.png"))
    page.locator(".nb-close").click()
    assert page.locator(".nb-detail").count() == 0


def two_runs(gap: float = 30) -> dict[str, Any]:
    """A session of two runs (the harness's run, asked twice, `gap` seconds apart), as the demo's
    report holds."""
    import dataclasses

    events = []
    for n, prompt in ((1, "First: summarise notes.txt"), (2, "Second: the same again")):
        for event in run_events():
            changes: dict[str, Any] = {"run_id": f"run-{n}"}
            if getattr(event, "time", None) is not None:
                changes["time"] = event.time + gap * (n - 1)
            if hasattr(event, "prompt"):
                changes["prompt"] = prompt
            events.append(dataclasses.replace(event, **changes))
    return snapshot(events)


def test_a_row_per_run_traces_each_bar_to_its_prompt(open_page: Any) -> None:
    # by phase (the widget): one requests lane holds both runs' attempts
    state = two_runs()
    page = open_page(state, "phases.html")
    request_bars = page.locator('.nb-lane[data-lane="request"] .nb-bar').count()
    assert page.locator('.nb-lane[data-lane="request"]').count() == 1
    # by run (the demo's report): a row per prompt, its phases below it, every bar in its row
    page = open_page({**state, "lanes_by": "run"}, "runs.html")
    labels = [t.strip() for t in page.locator(".nb-lane-label.nb-lane-run").all_inner_texts()]
    assert labels == ["1 · First: summarise notes.txt", "2 · Second: the same again"]
    rows = page.locator('.nb-lane[data-lane="request"]')
    assert rows.count() == 2
    per_run = [rows.nth(k).locator(".nb-bar").count() for k in range(2)]
    assert per_run[0] == per_run[1] and sum(per_run) == request_bars
    assert page.locator('.nb-lane[data-key="tool-1"] .nb-bar').count() == 2  # its own tools
    # the keyboard stays in the row it entered: End goes to that run's last attempt
    first = page.locator('.nb-lane[data-key="request-1"] .nb-bar').first
    first.focus()
    page.keyboard.press("End")
    focused = page.evaluate("document.activeElement.closest('.nb-lane').dataset.key")
    assert focused == "request-1"
    last_id = page.locator('.nb-lane[data-key="request-1"] .nb-bar').last.get_attribute("data-id")
    assert page.evaluate("document.activeElement.dataset.id") == last_id
    # the headline says how many runs succeeded
    assert page.locator(".nb-session-title").inner_text() == "Session: 2 runs, 2 succeeded"


def test_countdown_runs_down_while_waiting(open_page: Any) -> None:
    # The Retry-After wait (2.0 s) is shown as if it began 2 s from now: about 4 s remain.
    page = open_page(snapshot(live_events(), ahead=2.0))
    countdown = page.locator(".nb-status .nb-countdown")
    first = countdown.inner_text()
    match = COUNTDOWN.fullmatch(first)
    assert match, first
    status = page.locator(".nb-status").inner_text()
    assert status.startswith("rate limit: server asked to wait 2.0s, retrying in ")
    assert status.endswith("(attempt 2/4)")
    active = page.locator(".nb-wait.nb-server-wish.nb-wait-active")
    assert COUNTDOWN.fullmatch(active.inner_text())
    page.wait_for_timeout(1_000)
    later = COUNTDOWN.fullmatch(countdown.inner_text())
    assert later, countdown.inner_text()
    assert 0.5 <= float(match.group(1)) - float(later.group(1)) <= 1.8
    page.locator(".nb-root").screenshot(path=str(ARTIFACTS / "widget-live.png"))

    # A new state (the run went on and finished) re-renders and stops the countdown.
    page.evaluate("s => window.nbagentModel.set('state', s)", snapshot(run_events()))
    assert page.locator(".nb-status").inner_text() == "done: end_turn"
    assert page.locator(".nb-countdown").count() == 0
    assert page.locator(".nb-summary").count() == 1


def test_the_front_ends_stop_control(open_page: Any) -> None:
    page = open_page(snapshot(live_events(), ahead=2.0))
    assert page.locator(".nb-stop").count() == 0  # the export hides it, like make_view does
    page.evaluate("() => window.nbagentModel.set('show_stop', true)")
    stop = page.locator(".nb-stop")
    assert stop.count() == 1
    stop.click()
    assert page.evaluate("() => window.nbagentModel.get('stop_requested')") is True
    assert page.locator(".nb-stop").inner_text() == "stopping…"
    assert page.locator(".nb-stop").is_disabled()


def test_cleanup_stops_the_timer_and_listeners(open_page: Any) -> None:
    page = open_page(snapshot(live_events(), ahead=2.0))
    page.evaluate("() => window.nbagentCleanup()")
    frozen = page.locator(".nb-countdown").inner_text()
    page.wait_for_timeout(400)
    assert page.locator(".nb-countdown").inner_text() == frozen
    page.evaluate("s => window.nbagentModel.set('state', s)", snapshot(run_events()))
    assert page.locator(".nb-summary").count() == 0  # no longer listening


def test_an_empty_state_renders(open_page: Any) -> None:
    page = open_page(TimelineState().snapshot())
    assert page.locator(".nb-status").inner_text() == "idle"
    assert "No attempts yet." in page.locator(".nb-timeline").inner_text()


def test_the_legend_paints_the_palettes_colours(open_page: Any) -> None:
    # nbagent/_palette.py is what the static plots draw with: the widget must paint the same
    from matplotlib.colors import to_rgb

    from nbagent._palette import LEGEND, SWATCHES

    state = snapshot(run_events())
    state["waits"].append({**state["waits"][0], "kind": "paced", "server_wish": False})
    page = open_page(state)
    items = page.locator(".nb-legend .nb-legend-item")
    keys = [*LEGEND, "paced"]
    assert items.count() == len(keys)
    for index, key in enumerate(keys):
        swatch = SWATCHES[key]
        item = items.nth(index)
        assert item.inner_text().strip() == swatch.word
        css = "borderTopColor" if swatch.hatch else "backgroundColor"
        painted = rgb(item.locator("i").evaluate(f"n => getComputedStyle(n).{css}"))
        want = tuple(round(c * 255) for c in to_rgb(swatch.edge if swatch.hatch else swatch.face))
        assert painted == want, (key, painted, want)


def seconds(tick: str) -> float:
    """A tick's words ("0.25s", "2m30s") as seconds."""
    minutes, _, rest = tick.removesuffix("s").rpartition("m")
    return 60 * float(minutes or 0) + float(rest)


MEASURE = """root => {
  const box = (n) => n.getBoundingClientRect();
  const out = {labels: [], ticks: [], marks: []};
  for (const track of root.querySelectorAll('.nb-track')) {
    const shapes = [...track.querySelectorAll('.nb-bar, .nb-wait')];
    for (const shape of shapes) {
      const label = shape.querySelector('.nb-bar-label, .nb-wait-label');
      if (!label || !label.textContent || getComputedStyle(label).visibility === 'hidden') continue;
      const l = box(label), s = box(shape);
      const range = document.createRange();
      range.selectNodeContents(label);
      const text = range.getBoundingClientRect();  // the words, not the span around them
      const others = shapes.filter((o) => o !== shape).map(box).filter(
        (o) => o.left < text.right - 0.5 && o.right > text.left + 0.5
          && o.top < text.bottom && o.bottom > text.top);
      out.labels.push({text: label.textContent, outside: shape.classList.contains('nb-label-outside'),
        words: [text.left, text.right], shape: [s.left, s.right], overlaps: others.length,
        cut: label.scrollWidth > label.clientWidth + 1});
    }
  }
  for (const t of root.querySelectorAll('.nb-tick')) {
    const b = box(t);  // the first tick's words start at its time, the others are centred on it
    out.ticks.push([t.textContent, t.matches(':first-child') ? b.left : b.left + b.width / 2]);
  }
  for (const m of root.querySelectorAll('.nb-axis-track > :not(.nb-tick)')) {
    const b = box(m);
    out.marks.push(b.left + b.width / 2);
  }
  const first = [...root.querySelectorAll('.nb-bar')].map(box).sort((a, b) => a.left - b.left)[0];
  out.first = [first.left, first.right];
  return out;
}"""


def demo_run() -> dict[str, Any]:
    """`nbagent demo`'s first seconds: a 429 of 0.6 s, its Retry-After of 1 s, a 503 and its
    short backoff, then a string of attempts of a few milliseconds each."""
    m, run = "demo", "run-demo"
    events: list[Any] = [RunStarted(run_id=run, time=0.0, prompt="What is 17 * 23 + 4?", model=m)]

    def attempt(
        start: float, end: float, n: int, turn: int, code: int = 0, wait: float = 0
    ) -> None:
        where = {"phase": "request", "run_id": run, "turn": turn, "attempt": n, "model": m}
        events.append(AttemptStarted(time=start, max_attempts=4, **where))
        if not code:
            events.append(
                AttemptSucceeded(time=end, max_attempts=4, stop_reason="end_turn", **where)
            )
            return
        error = "RateLimited" if code == 429 else "ServerError"
        events.append(
            AttemptFailed(
                time=end,
                max_attempts=4,
                action="retry",
                error=error,
                status_code=code,
                message="",
                **where,
            )
        )
        events.append(
            RetryScheduled(
                time=end,
                message="",
                next_attempt=n + 1,
                max_attempts=4,
                delay_s=wait,
                policy_delay_s=wait,
                error=error,
                status_code=code,
                retry_after_s=wait if code == 429 else None,
                **where,
            )
        )

    attempt(0.0, 0.6, 1, 1, 429, 1.0)
    attempt(1.65, 1.703, 2, 1, 503, 0.02)
    attempt(1.723, 1.960, 3, 1)
    for k in range(12):
        attempt(2.0 + 0.05 * k, 2.03 + 0.05 * k, 1, 2 + k)
    events.append(RunFinished(run_id=run, time=2.6, turn=13, end_reason="end_turn",
                              usage=Usage(100, 10, cost_usd=0.0, requests=15), final_text="",
                              model=m))  # fmt: skip
    return {**snapshot(events), "lanes_by": "run"}


def test_bar_words_fit_or_step_aside_and_the_axis_is_linear_between_breaks(
    open_page: Any,
) -> None:
    # the demo's report: thin bars beside a long wait drawn shorter (issue 37: "atte", "Stre",
    # "40" cut off, and ticks 0.25 s apart drawn 104 px and 231 px apart)
    for state in (demo_run(), {**two_runs(gap=90), "lanes_by": "run"}):
        for width in (1000, 700):
            page = open_page(state, f"fit-{width}.html")
            page.set_viewport_size({"width": width, "height": 900})
            page.reload()  # labels are placed when the page renders, at its width
            page.wait_for_selector(".nb-root .nb-timeline")
            seen = page.locator(".nb-root").evaluate(MEASURE)
            assert seen["labels"], "the bars carry words"
            for label in seen["labels"]:
                assert not label["cut"], (width, label)
                if label["outside"]:
                    assert label["overlaps"] == 0, (width, label)  # beside its bar, on free space
                else:
                    left, right = label["shape"]
                    words = label["words"]
                    assert left - 0.5 <= words[0] and words[1] <= right + 0.5, (width, label)
    # where no "//" lies between two ticks, they are as far apart as the bars' scale says
    page = open_page(demo_run(), "axis.html")
    seen = page.locator(".nb-root").evaluate(MEASURE)
    ticks = [(seconds(text), x) for text, x in seen["ticks"]]
    marks = seen["marks"]
    assert len(ticks) >= 3 and marks, seen
    per_second = (seen["first"][1] - seen["first"][0]) / 0.6  # the 429's bar
    pairs = [
        (x1 - x0) / (t1 - t0)
        for (t0, x0), (t1, x1) in itertools.pairwise(ticks)
        if not any(x0 < m < x1 for m in marks)
    ]
    assert pairs, (ticks, marks)
    for scale in pairs:
        assert abs(scale / per_second - 1) < 0.03, (ticks, marks, per_second)
