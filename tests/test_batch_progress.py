"""A batch's progress as a user sees it: lanes and counts, the live view's pushes, the terminal
bar, and stopping a batch in this process (`start(...)`, `handle.cancel()`)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from nbagent.batch import BatchResult, start
from nbagent.batch._map import map
from nbagent.batch._progress import BatchProgress, TerminalBar
from nbagent.mock import serve
from nbagent.notebook._batch_view import COLOURS, BatchView, render_text


class Tick:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_lanes_and_counts_follow_each_agent() -> None:
    p = BatchProgress(total=3)
    p.set_lane(0, "running")
    p.set_lane(1, "waiting")
    p.finish(2, "failed")
    snap = p.snapshot()
    assert snap["lanes"] == "rwf"
    assert (snap["running"], snap["waiting"], snap["failed"], snap["done"]) == (1, 1, 1, 1)
    p.finish(2, "ok")  # a row is counted once
    assert p.done == 1
    p.add_retry(0.5, 3)
    assert p.snapshot()["retries_per_min"] > 0
    assert "1/3 done (1 failed) · 1 running · 1 waiting" in p.text()


def test_the_view_pushes_at_most_ten_times_a_second_and_the_last_picture_always() -> None:
    clock = Tick()
    p = BatchProgress(total=100)
    view = BatchView(p.snapshot(), now=clock)
    for i in range(100):  # a hundred changes within 50 ms
        clock.t = i * 0.0005
        p.finish(i, "ok")
        view.update(p.snapshot())
    assert view.pushes == 1  # the first; the rest were too early (no loop to schedule one)
    view.update(p.snapshot(), force=True)
    view.finished()
    assert view.state["done"] == 100 and view.state["finished"]
    assert view.state["colours"] == COLOURS
    assert render_text(view.state).startswith("nbagent.map: 100/100 done")


def test_the_view_s_stop_calls_back_once_pressed() -> None:
    stopped: list[bool] = []
    view = BatchView(BatchProgress(total=1).snapshot(), on_stop=lambda: stopped.append(True))
    assert view.show_stop
    view.stop_requested = True
    assert stopped == [True]


def test_a_terminal_gets_a_one_line_bar() -> None:
    p = BatchProgress(total=4)
    stream = io.StringIO()
    bar = TerminalBar(p, stream=stream)
    p.finish(0, "ok")
    bar.update(p, force=True)
    bar.close()
    text = stream.getvalue()
    assert text.startswith("\r[######..................] 1/4 done") and text.endswith("\n")


def test_map_shows_the_bar_on_stderr_when_asked(capsys: Any) -> None:
    with serve() as server:
        map(["a", "b"], base_url=server.url, show=True)
    err = capsys.readouterr().err
    assert "2/2 done (0 failed)" in err


def test_cancel_a_local_batch_keeps_what_finished() -> None:
    async def main(url: str) -> tuple[BatchResult, int, int]:
        handle = start([f"q{i}" for i in range(12)], base_url=url, concurrency=2, show=False)
        while handle.progress.done < 2:
            await asyncio.sleep(0.01)
        handle.cancel()
        out = await handle
        return out, handle.progress.done, handle.progress.failed

    with serve(demo_delay_s=0.02) as server:
        out, done, failed = asyncio.run(main(server.url))
    df = out.results
    assert out.cancelled and len(df) == 12
    ok, cancelled = df[df["error"].isna()], df[df["end_reason"] == "cancelled"]
    assert len(ok) >= 2 and len(ok) + len(cancelled) == 12
    assert (cancelled["error"] == "Aborted").all()
    assert done == 12 and failed == len(cancelled)
    stopped = out.attempts[out.attempts["outcome"] == "cancelled"]
    assert len(stopped) >= 1  # the agents that were running kept their attempts, marked
    assert set(out.attempts["agent_id"]) <= {f"{i}.1" for i in range(12)}
