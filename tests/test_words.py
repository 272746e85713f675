"""Counted nouns: what nbagent prints says "1 prompt", never "1 prompts"."""

from __future__ import annotations

import pandas as pd

from nbagent._core._words import counted
from nbagent.batch import map
from nbagent.batch._frames import BatchResult
from nbagent.batch._progress import BatchProgress
from nbagent.notebook._batch_view import render_text


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert [counted(n, "prompt") for n in (0, 1, 2)] == ["0 prompts", "1 prompt", "2 prompts"]
    assert counted(1, "provider batch", "provider batches") == "1 provider batch"
    assert counted(3, "provider batch", "provider batches") == "3 provider batches"
    assert counted(1200, "item") == "1,200 items"


def test_a_dry_run_of_one_prompt_says_one_prompt() -> None:
    said = map(["hello"], model="demo", dry_run=True).summary()
    assert said.startswith("1 prompt to demo: about ")


def test_a_provider_batch_of_one_item_says_one_batch_and_one_item() -> None:
    attempts = pd.DataFrame(
        {"batch_id": ["b1", "b1"], "action": ["retry", "none"], "phase": ["request"] * 2}
    )
    results = pd.DataFrame({"error": [None], "cost_usd": [0.001]})
    result = BatchResult(results, attempts, duration_s=2.0, backend="provider")
    said = result.summary()
    assert "1/1 prompt ok, 0 failed in 2.0 s; 1 provider batch, 1 item resubmitted" in said
    snap = {"done": 1, "total": 1, "batches": [{"collected": True}]}
    assert render_text(snap).endswith(", 1 provider batch (0 open)")
    progress = BatchProgress(1)
    progress.batches = {1: {"collected": True}}
    assert progress.batches_text() == " · 1 batch (0 open)"
