"""The notebooks are committed clean and each teaches its concept in prose.

Executing them is CI's job (the docs build in scripts/test.sh runs each one); these checks are
cheap and run with the rest of the suite: the expected notebooks exist, are valid nbformat
4 with the python3 kernel, carry no outputs or execution counts, and explain themselves in
markdown. Binder's files are checked too, since the README's badge depends on them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BINDER = ROOT / "binder"
EXPECTED = [
    "01_quickstart.ipynb",
    "02_fault_lab.ipynb",
    "03_backoff_analysis.ipynb",
    "04_tool_errors.ipynb",
    "05_compaction.ipynb",
    "06_budgets_and_fallbacks.ipynb",
    "07_real_providers.ipynb",
    "08_tracing_and_durable_log.ipynb",
    "09_batch_prompting.ipynb",
    "10_watch_your_sdk.ipynb",
    "11_replay_and_what_if.ipynb",
    "12_structured_outputs.ipynb",
    "13_provider_batches.ipynb",
    "14_classroom.ipynb",
]


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    return data


def source(cell: dict[str, Any]) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def test_the_expected_notebooks_are_there() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_is_nbformat_4_with_the_python3_kernel(name: str) -> None:
    nb = load(name)
    assert nb["nbformat"] == 4
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert nb["cells"], "an empty notebook"
    assert all(c["cell_type"] in ("markdown", "code") for c in nb["cells"])


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_carries_no_outputs(name: str) -> None:
    nb = load(name)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert cell.get("outputs") == [], f"cell {i} has outputs: run nbstripout"
        assert cell.get("execution_count") is None, f"cell {i} has an execution count"
    # nbstripout also drops widget state and other run-time metadata
    assert "widgets" not in nb["metadata"]


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_explains_its_concept_in_markdown(name: str) -> None:
    nb = load(name)
    markdown = [source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert len(markdown) >= 3
    assert nb["cells"][0]["cell_type"] == "markdown"
    assert source(nb["cells"][0]).startswith("# "), "the first cell is the title"
    assert sum(len(m.split()) for m in markdown) >= 150, "too little explanation"


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_needs_no_key_and_no_network(name: str) -> None:
    code = "\n".join(source(c) for c in load(name)["cells"] if c["cell_type"] == "code")
    assert "https://" not in code and "http://" not in code
    if name != "07_real_providers.ipynb":
        assert "API_KEY" not in code


def test_real_provider_notebook_skips_cleanly_without_a_key() -> None:
    """Each provider's section asks `ready(...)` first, which prints one line and returns None
    without the provider's key; everything that would call a provider is guarded by it."""
    code = [source(c) for c in load("07_real_providers.ipynb")["cells"] if c["cell_type"] == "code"]
    (helpers,) = [c for c in code if "def ready(" in c]
    assert "skipped." in helpers
    sections = [c for c in code if "ready(" in c and "def ready(" not in c]
    assert len(sections) >= 5, "a section per provider"
    for cell in sections:
        head, guard, body = cell.partition("\nif model:\n")
        assert head.startswith("model = ready(") and guard, f"an unguarded section:\n{cell}"
        assert all(line.startswith("    ") for line in body.splitlines() if line.strip())
    for cell in code:
        if "await run(" in cell and "ready(" not in cell and "MockServer(" not in cell:
            assert "if first is None:" in cell, f"a cell that needs a key is not guarded:\n{cell}"


def test_binder_installs_the_package_and_pins_python() -> None:
    requirements = (BINDER / "requirements.txt").read_text(encoding="utf-8").split("\n")
    lines = [line.strip() for line in requirements if line.strip() and not line.startswith("#")]
    assert "-e ." in lines
    assert any(line.startswith("jupyterlab") for line in lines)
    runtime = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    assert runtime.startswith("python-3.")
    assert int(runtime.split(".")[1]) >= 10


def test_readme_leads_to_the_notebooks_and_to_binder() -> None:
    # the README links the folder; the docs' home page lists every notebook of it (written by
    # the docs build from the folder, tests/test_docs_build.py)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](notebooks/)" in readme
    # Binder opens JupyterLab on the quickstart: the badge once the repository URL is set,
    # until then the sentence saying how to open it from a copy (tests/test_release.py)
    assert "mybinder.org" in readme
    assert "lab/tree/notebooks/01_quickstart.ipynb" in readme
    assert (ROOT / "notebooks" / "01_quickstart.ipynb").exists()
