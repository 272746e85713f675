"""`run_sync`, `await run`, `start` and `%%agent` in a real ipykernel, executed with nbclient.

The issue's worry: on ipykernel 7, patching the loop (nest_asyncio) and then `asyncio.run()` has
been seen to silently drop the next queued cell. nbagent patches nothing: `run_sync` runs on a
worker thread with its own loop. The fixture notebook has a `run_sync` cell followed by marker
cells, and a last cell that asserts every marker is there; here we check that every cell ran and
that each widget under a cell received its run's events (nbclient stores the widget state).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NOTEBOOK = Path(__file__).parent / "notebooks" / "run_sync.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def text_of(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, float]:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "commit it without outputs"
    cwd = tmp_path_factory.mktemp("run_sync_nb")
    client = NotebookClient(
        nb,
        timeout=60,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
        store_widget_state=True,
    )
    started = time.monotonic()
    client.execute()
    return nb, time.monotonic() - started


def test_every_cell_after_run_sync_runs(executed: tuple[Any, float]) -> None:
    nb, seconds = executed
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    for cell in code:
        assert not [o for o in cell.outputs if o.get("output_type") == "error"], cell.source
    outputs = "".join(text_of(c) for c in code)
    for marker in ("marker a", "marker b", "marker c"):
        assert marker in outputs
    assert "ALL MARKERS: abcdefgh" in text_of(code[-1])
    print(f"the notebook ran in {seconds:.1f} s")


def test_each_way_of_running_answers(executed: tuple[Any, float]) -> None:
    nb, _ = executed
    outputs = "".join(text_of(c) for c in nb.cells if c.cell_type == "code")
    assert "run_sync: 2+2 = 4." in outputs
    assert "run_sync again: 3*7 = 21." in outputs
    assert "await run: 6*7 = 42." in outputs
    assert "started: False" in outputs  # start() returned while the run was still going
    assert "awaited start: 5+5 = 10." in outputs and outputs.count(" True\n") >= 1
    assert "magic: 12*12 = 144." in outputs
    assert "magic statuses: [500]" in outputs  # --faults "500" was retried
    assert "12*12 + 1 = 145." in outputs  # %%agent --wait printed its answer
    assert "magic history: 8" in outputs  # the conversation continued across cells


def test_widgets_shown_under_their_cells_saw_their_runs(executed: tuple[Any, float]) -> None:
    nb, _ = executed
    code = [c for c in nb.cells if c.cell_type == "code"]
    # In the kernel: every timeline (five: run_sync, await run, start, %%agent twice) got
    # its run's events, whether they came from a worker thread or a background task.
    assert "timelines: 5 ['done: end_turn']" in "".join(text_of(c) for c in code)
    # In the saved notebook: one view per showing cell. nbclient records widget messages
    # only while the cell that owns them runs, so only the foreground runs' final states are
    # in it (a browser takes comm messages at any time: see test_jupyterlab_e2e.py).
    states = nb.metadata["widgets"][WIDGET_STATE]["state"]
    shown: dict[str, str] = {}  # first line of the cell -> the timeline's saved status
    for cell in code:
        for output in cell.outputs:
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            box = states[view["model_id"]]["state"]
            children = [ref.removeprefix("IPY_MODEL_") for ref in box["children"]]
            timelines = [states[c]["state"] for c in children if "state" in states[c]["state"]]
            assert len(timelines) == 1, children
            shown[cell.source.splitlines()[0]] = timelines[0]["state"]["status"]
    assert len(shown) == 5, shown
    foreground = {line: status for line, status in shown.items() if "start(" not in line}
    foreground.pop('%%agent --faults "500" --seed 3')
    assert list(foreground.values()) == ["done: end_turn"] * 3, shown
