"""The documentation site: every public name has a docstring and a reference entry, the notebook
list comes from the folder, and widget outputs become static HTML the page can show.

The build itself (`mkdocs build --strict`, with the notebooks executed) runs in
scripts/test.sh; these checks are cheap and say exactly which name or page is missing.
"""

from __future__ import annotations

import asyncio
import html
import importlib
import importlib.util
import json
import pkgutil
import re
import types
from pathlib import Path
from typing import Any

import griffe
import nbformat
import pytest
from harness.timeline_script import run_events

import nbagent
from nbagent.notebook import TimelineState

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.M)


def public_modules() -> list[str]:
    """nbagent and every submodule of it whose name has no leading underscore."""
    subs = (m.name for m in pkgutil.iter_modules(nbagent.__path__) if m.name[0] != "_")
    return ["nbagent", *sorted(f"nbagent.{name}" for name in subs)]


def public_names(module_name: str) -> list[str]:
    """`__all__`, or for a module without one, the classes and functions it defines."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and isinstance(value, (type, types.FunctionType))
        and value.__module__ == module_name
    ]


PUBLIC = [(m, n) for m in public_modules() for n in public_names(m)]


def resolve(path: str) -> Any:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(path)


def directives() -> dict[str, Path]:
    """Every `::: dotted.path` of the docs sources, with the page it is on."""
    found: dict[str, Path] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for target in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            found[target] = page
    return found


def test_the_public_modules_are_found() -> None:
    # the list is derived, so a new public submodule is checked without editing this file
    mods = public_modules()
    for expected in ("nbagent.errors", "nbagent.events", "nbagent.analysis", "nbagent.mock"):
        assert expected in mods
    assert len(PUBLIC) > 150


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    # griffe is what mkdocstrings reads: a docstring it cannot see is not on the page
    loaded = griffe.load("nbagent", search_paths=[str(ROOT)], resolve_aliases=True)
    assert isinstance(loaded, griffe.Module)
    assert Path(str(loaded.filepath)).resolve().is_relative_to(ROOT)
    return loaded


def test_every_public_name_has_a_docstring(package: griffe.Module) -> None:
    missing = []
    for module_name, name in PUBLIC:
        module = package if module_name == "nbagent" else package[module_name.split(".", 1)[1]]
        obj = module[name]
        target = obj.final_target if obj.is_alias else obj
        if target.docstring is None or not target.docstring.value.strip():
            missing.append(f"{module_name}.{name} ({target.relative_filepath}:{target.lineno})")
    assert not missing, "public names without a docstring (say why they exist):\n" + "\n".join(
        missing
    )


def test_every_public_name_has_a_reference_entry() -> None:
    documented = {id(resolve(target)) for target in directives()}
    missing = [
        f"{module_name}.{name}"
        for module_name, name in PUBLIC
        if id(getattr(importlib.import_module(module_name), name)) not in documented
    ]
    assert not missing, (
        "public names with no `::: name` entry in docs/reference/*.md:\n" + "\n".join(missing)
    )


def test_every_reference_entry_names_a_public_object() -> None:
    public_ids = {id(getattr(importlib.import_module(m), n)) for m, n in PUBLIC}
    for target, page in directives().items():
        assert target.startswith("nbagent."), (target, page.name)
        assert "._" not in target, f"{page.name} documents a private path: {target}"
        assert id(resolve(target)) in public_ids, f"{page.name}: {target} is not public"


# ---- the notebooks hook ---------------------------------------------------------------------


def load_hook() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_notebooks_hook", DOCS / "_hooks" / "notebooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeConfig:
    def __init__(self, nav: list[Any]) -> None:
        self.nav = nav


def test_the_notebook_nav_is_every_notebook_of_the_folder_in_order() -> None:
    hook = load_hook()
    config = FakeConfig([{"Getting started": "index.md"}, {"Notebooks": []}])
    hook.on_config(config)
    entries = config.nav[1]["Notebooks"]
    paths = [next(iter(e.values())) for e in entries]
    assert paths == [f"notebooks/{p.name}" for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    assert len(paths) >= 8
    titles = [next(iter(e)) for e in entries]
    assert titles[0].startswith("1 · Quickstart")  # the notebook's own heading


def widget_notebook(states: dict[str, Any], model_id: str) -> Any:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("await agent.run('...')")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": model_id,
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/html": "<p>nbagent — idle</p>",  # the fallback when it was displayed
                "text/plain": "nbagent: idle",
            },
        )
    ]
    nb.cells = [cell]
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "state": states,
            "version_major": 2,
            "version_minor": 0,
        }
    }
    return nb


def srcdoc(fragment: str) -> str:
    match = re.search(r'srcdoc="([^"]*)"', fragment)
    assert match is not None, fragment[:200]
    return html.unescape(match.group(1))


def test_a_finished_timeline_becomes_its_exported_page() -> None:
    timeline = TimelineState(wall=lambda: 1_000.0)
    for event in run_events():
        timeline(event)  # type: ignore[arg-type]
    final = json.loads(json.dumps(timeline.snapshot(), default=str))
    states = {
        "box": {
            "model_name": "VBoxModel",
            "state": {"children": ["IPY_MODEL_button", "IPY_MODEL_timeline"]},
        },
        "button": {"model_name": "ButtonModel", "state": {"description": "Finished"}},
        "timeline": {
            "model_name": "AnyModel",
            "state": {"_esm": "export default {}", "state": final, "show_stop": False},
        },
    }
    nb = widget_notebook(states, "box")
    load_hook().make_widgets_static(nb)
    data = nb.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert "widgets" not in nb.metadata  # no widget manager loaded from a CDN
    page = srcdoc(data["text/html"])
    assert "nbagent — idle" not in data["text/html"]  # the final picture, not the first one
    assert 'id="nbagent-state"' in page
    assert "const nbTimeline =" in page  # the widget's own module draws it
    assert "https://" not in page and "http://" not in page
    assert "Summarise notes.txt" in page  # the run's prompt, from the saved state
    assert "Finished" not in page  # controls do nothing on a static page: left out


def test_another_anywidget_is_drawn_by_its_own_module() -> None:
    states = {
        "view": {
            "model_name": "AnyModel",
            "state": {
                "_esm": "export default { render({ model, el }) { el.textContent = 'x'; } }",
                "_css": ".nbb { color: red }",
                "state": {"done": 3, "total": 4, "lanes": "ooor"},
            },
        }
    }
    nb = widget_notebook(states, "view")
    load_hook().make_widgets_static(nb)
    page = srcdoc(nb.cells[0].outputs[0]["data"]["text/html"])
    assert ".nbb { color: red }" in page
    assert '"lanes": "ooor"' in page or '"lanes":"ooor"' in page
    assert "el.textContent" in page


def test_a_widget_with_no_saved_state_keeps_its_fallback() -> None:
    nb = widget_notebook({}, "gone")
    load_hook().make_widgets_static(nb)
    data = nb.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert data["text/plain"] == "nbagent: idle"


def test_a_playground_shows_its_figures_and_where_its_controls_were_left() -> None:
    states = {
        "play": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_c", "IPY_MODEL_r"]}},
        "c": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_d"]}},
        "s": {"model_name": "IntSliderModel", "state": {"description": "max attempts", "value": 6}},
        "d": {
            "model_name": "DropdownModel",
            "state": {"description": "jitter", "index": 1, "_options_labels": ["full", "equal"]},
        },
        "r": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_h", "IPY_MODEL_i"]}},
        "h": {"model_name": "HTMLModel", "state": {"value": "<b class='calls'>86</b>"}},
        "i": {
            "model_name": "ImageModel",
            "state": {"format": "png"},
            "buffers": [{"path": ["value"], "data": "iVBORw0KGgo=", "encoding": "base64"}],
        },
    }
    nb = widget_notebook(states, "play")
    load_hook().make_widgets_static(nb)
    shown = nb.cells[0].outputs[0]["data"]["text/html"]
    assert "flex-direction:row" in shown  # the HBox keeps controls beside the figures
    assert '<img alt="figure" src="data:image/png;base64,iVBORw0KGgo=">' in shown
    assert "max attempts" in shown and "<b>6</b>" in shown
    assert "<b>equal</b>" in shown
    assert "<b class='calls'>86</b>" in shown


def test_the_readme_links_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs|notebooks)/[^)#\s]+)", readme)
    assert any(link.startswith("docs/") for link in links), "the README does not link the docs"
    for link in links:
        assert (ROOT / link).exists(), f"README links {link}, which does not exist"


@pytest.mark.e2e
def test_a_widget_fed_after_its_cell_shows_its_final_state(tmp_path: Path) -> None:
    # as with agent.start: one cell displays the widget and starts a task that feeds it while
    # a later cell runs (its updates belong to the cell that started the task)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from IPython.display import display\n"
            "from nbagent.notebook import TimelineWidget\n"
            "widget = TimelineWidget()\n"
            "display(widget)"
        ),
        nbformat.v4.new_code_cell(
            f"import asyncio, sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
            "from harness.timeline_script import run_events\n"
            "async def feed():\n"
            "    await asyncio.sleep(0.2)\n"
            "    for event in run_events():\n"
            "        widget(event)\n"
            "task = asyncio.get_running_loop().create_task(feed())"
        ),
        nbformat.v4.new_code_cell("await task"),
    ]
    src = tmp_path / "fed_later.ipynb"
    nbformat.write(nb, src)
    out = tmp_path / "out" / "notebooks" / "fed_later.ipynb"
    asyncio.run(load_hook()._execute(src, out))
    executed = nbformat.read(out, as_version=4)
    assert len(executed.cells) == 3  # the hidden cell that re-sent the state is gone
    page = srcdoc(executed.cells[0].outputs[0]["data"]["text/html"])
    assert "Summarise notes.txt" in page  # the final state, not the empty first one


def test_a_notebooks_links_to_the_guide_open_in_jupyter_and_on_the_site() -> None:
    hook = load_hook()
    # in the repository (JupyterLab, Binder) the link is to the page's markdown file
    cells = json.loads((ROOT / "notebooks" / "12_structured_outputs.ipynb").read_text())["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "[Structured outputs](../docs/guide/structured-outputs.md)" in text
    assert (ROOT / "docs" / "guide" / "structured-outputs.md").exists()
    # on the site, from notebooks/12_structured_outputs/, to the built page
    page = '<a href="../docs/guide/structured-outputs.md#modes">Structured outputs</a>'
    assert (
        hook.site_links(page)
        == '<a href="../../guide/structured-outputs/#modes">Structured outputs</a>'
    )
    assert (
        hook.site_links(page, False)
        == '<a href="../guide/structured-outputs.html#modes">Structured outputs</a>'
    )
