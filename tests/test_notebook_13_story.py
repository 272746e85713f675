"""Notebook 13 tells a story of one batch (an invalid item and one out of credit fail for good,
the overloaded and the expired are resubmitted, one item expires in every submission): these
tests run the notebook's own cells and hold its prose to what they show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "13_provider_batches.ipynb"


def code_cells() -> list[str]:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.fixture(scope="module")
def story() -> Any:
    """The namespace after the notebook's first batch (its setup, its bill and its batch)."""
    cells = code_cells()
    batch = next(i for i, c in enumerate(cells) if "set_faults" in c and "retry=retry" in c)
    ns: dict[str, Any] = {}
    try:
        for cell in cells[: batch + 1]:
            exec(compile(cell, str(NOTEBOOK), "exec"), ns)
        yield ns
    finally:
        if "server" in ns:
            ns["server"].stop()


def test_the_invalid_item_and_the_one_out_of_credit_fail_for_good(story: Any) -> None:
    out = story["out"]
    errors = out.results["error"]
    assert errors.loc[1] == "BadRequest"  # the fault script's "invalid", second in order
    assert errors.loc[4] == "QuotaExceeded"
    a = out.attempts
    for index in (1, 4):  # sent once: failing for good is not retried
        assert len(a[a["prompt_index"] == index]) == 1


def test_the_overloaded_and_the_expired_are_resubmitted_and_only_they(story: Any) -> None:
    a: pd.DataFrame = story["out"].attempts
    first = a[a["attempt"] == 1]
    again = set(a[a["attempt"] > 1]["prompt_index"])
    retried = set(first[first["action"] == "retry"]["prompt_index"])
    assert again == retried
    kinds = set(first[first["action"] == "retry"]["error_kind"])
    assert kinds == {"Overloaded", "ServerError"}  # the 529s and the items the expiry reached
    succeeded_first = set(first[first["outcome"] == "ok"]["prompt_index"])
    assert not succeeded_first & again  # what succeeded was never sent again


def test_one_item_expires_in_every_submission_and_runs_out_of_attempts(story: Any) -> None:
    out = story["out"]
    a = out.attempts
    per_item = a.groupby("prompt_index")["attempt"].max()
    spent = per_item[per_item == 4].index.tolist()
    assert len(spent) == 1
    (index,) = spent
    assert set(a[a["prompt_index"] == index]["error_kind"]) == {"ServerError"}
    assert out.results.loc[index, "error"] == "ServerError"
    assert out.results["error"].notna().sum() == 3  # the invalid, the one out of credit, it
    # and the cell that shows these rows shows that item
    shown = next(c for c in code_cells() if "isin(" in c)
    assert str(index) in shown.split("isin(")[1].split(")")[0]


def test_the_labelled_rows_are_told_apart_by_their_reviews() -> None:
    # the setup cell and the structured section's batch, as the notebook runs them
    cells = code_cells()
    labelled_cell = next(c for c in cells if "class Label" in c)
    ns: dict[str, Any] = {}
    try:
        for cell in (cells[0], labelled_cell):  # not under this module's __future__ import
            exec(compile(cell, str(NOTEBOOK), "exec", dont_inherit=True), ns)
    finally:
        if "server" in ns:
            ns["server"].stop()
    results = ns["labelled"].results
    answered = results[results["error"].isna()]
    assert set(answered["sentiment"]) == {"positive", "negative", "neutral"}
    # a loved phone and a kettle that broke are not labelled alike
    assert answered.loc[0, ["sentiment", "stars"]].tolist() == ["positive", 5]
    assert answered.loc[1, ["sentiment", "stars"]].tolist() == ["negative", 1]
