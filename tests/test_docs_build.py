"""The docs build's notebook checks: the home page lists every notebook, the kernels draw
`plt.show()` figures (whatever MPLBACKEND the build runs under), and a cell whose figure is not
on its built page fails the build, naming the notebook and the cell.

The whole build (`mkdocs build --strict`, every notebook executed) runs in scripts/test.sh; here
the hook's parts, on small notebooks.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import types
from pathlib import Path

import nbformat
import pytest
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "docs" / "_hooks" / "notebooks.py"
PYTHON3 = {"name": "python3", "display_name": "Python 3", "language": "python"}


def load_hook() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_notebooks_hook_build", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_home_page_lists_every_notebook_of_the_folder() -> None:
    hook = load_hook()
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert hook.NOTEBOOK_LIST.search(index), "docs/index.md lost the notebook list's line"
    page = hook.on_page_markdown(index, page=None, config=None, files=None)
    assert hook.NOTEBOOK_LIST.search(page) is None
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    listed = [line for line in page.splitlines() if line.startswith("- [") and "notebooks/" in line]
    assert [line.rsplit("](", 1)[1].rstrip(")") for line in listed] == [
        f"notebooks/{p.name}" for p in notebooks
    ]
    # each titled by the notebook's own first heading
    assert listed[0].startswith("- [1 · Quickstart")
    assert "11 · Real failures, replayed" in page
    # a page without the line is left as it is
    assert hook.on_page_markdown("# Guide\n", page=None, config=None, files=None) == "# Guide\n"


def executed(cells: list[tuple[str, int | None, list[dict[str, object]]]]) -> nbformat.NotebookNode:
    """An executed notebook: (source, figures counted, outputs) per code cell."""
    nb = nbformat.v4.new_notebook()
    for n, (source, figures, outputs) in enumerate(cells, 1):
        cell = nbformat.v4.new_code_cell(source, execution_count=n)
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        if figures:
            cell.metadata["docs_figures"] = figures
        nb.cells.append(cell)
        nb.cells.append(nbformat.v4.new_markdown_cell("![a picture of the text](x.png)"))
    return nb


def page_html(images: dict[int, bool]) -> str:
    """What mkdocs-jupyter writes: per cell its prompt, then its outputs; a text cell after it."""
    parts = []
    for n, image in images.items():
        parts.append(
            '<div class="jp-Cell jp-CodeCell jp-Notebook-cell">'
            f'<div class="jp-InputPrompt jp-InputArea-prompt">In&nbsp;[{n}]:</div><pre>code</pre>'
            + (
                '<img alt="No description has been provided" src="data:image/png;base64,xx">'
                if image
                else "<pre>text</pre>"
            )
            + '</div><div class="jp-Cell jp-MarkdownCell jp-Notebook-cell"><img src="x.png"></div>'
        )
    return "".join(parts)


def test_a_cell_whose_figure_is_not_on_the_page_is_named() -> None:
    hook = load_hook()
    nb = executed(
        [
            ("import pandas as pd", None, []),
            ("fig, ax = plt.subplots()\nplt.show()", 1, []),
            ("plot_timeline(df)", 1, []),
        ]
    )
    # cell 2's figure reached the page, cell 3's did not (the text cell's picture is not it)
    lost = hook.lost_figures(nb, page_html({1: False, 2: True, 3: False}))
    assert lost == [
        "cell 5 (In [3], 'plot_timeline(df)') made 1 figure but the page shows no image"
    ]
    assert hook.lost_figures(nb, page_html({1: False, 2: True, 3: True})) == []
    # a figure inside a widget's static page (an iframe's srcdoc) counts as shown
    framed = page_html({1: False, 2: True}) + (
        '<div class="jp-Cell jp-CodeCell"><div class="jp-InputPrompt jp-InputArea-prompt">'
        'In [3]:</div><iframe srcdoc="&lt;img src=&quot;data:image/png;base64,xx&quot;&gt;">'
        "</iframe></div>"
    )
    assert hook.lost_figures(nb, framed) == []


class FakeFile:
    def __init__(self, src_uri: str) -> None:
        self.src_uri = src_uri


class FakePage:
    def __init__(self, src_uri: str) -> None:
        self.file = FakeFile(src_uri)


def test_the_build_fails_on_a_lost_figure_naming_notebook_and_cell(tmp_path: Path) -> None:
    hook = load_hook()
    nb = executed([("fig = plt.figure()\nplt.show()", 1, [])])
    path = tmp_path / "notebooks" / "03_backoff.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    hook._executed["03_backoff.ipynb"] = path
    page = FakePage("notebooks/03_backoff.ipynb")
    config = types.SimpleNamespace(use_directory_urls=True)
    with pytest.raises(PluginError) as failure:
        hook.on_page_content(page_html({1: False}), page=page, config=config, files=None)
    assert "notebooks/03_backoff.ipynb" in str(failure.value)
    assert "cell 1 (In [1], 'fig = plt.figure()') made 1 figure" in str(failure.value)
    shown = page_html({1: True})
    assert hook.on_page_content(shown, page=page, config=config, files=None) == shown
    # other pages are not notebooks: left alone
    guide = FakePage("guide/retry.md")
    assert hook.on_page_content("<p>x</p>", page=guide, config=config, files=None) == "<p>x</p>"


@pytest.mark.e2e
def test_a_notebook_executed_for_the_docs_keeps_its_plt_show_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # scripts/test.sh exports MPLBACKEND=Agg, under which plt.show() draws nothing
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": PYTHON3})
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 0 · A test notebook"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt"),
        nbformat.v4.new_code_cell("fig, ax = plt.subplots()\nax.plot([1, 2, 3])\nplt.show()"),
        nbformat.v4.new_code_cell("print('no figure here')"),
        nbformat.v4.new_code_cell("hidden = plt.figure()\nplt.close(hidden)"),
    ]
    src = tmp_path / "plots.ipynb"
    nbformat.write(nb, src)
    out = tmp_path / "out" / "notebooks" / "plots.ipynb"
    asyncio.run(load_hook()._execute(src, out))
    cells = nbformat.read(out, as_version=4).cells
    assert len(cells) == 5  # the hidden cells are gone
    shown = cells[2]
    assert any("image/png" in o.get("data", {}) for o in shown.outputs), shown.outputs
    assert shown.metadata["docs_figures"] == 1
    assert "docs_figures" not in cells[3].metadata
    assert cells[4].metadata["docs_figures"] == 1  # made and closed: it never reached the page
    assert [c.execution_count for c in cells[1:]] == [1, 2, 3, 4]  # no prompt shifted
    # the kernel spoke over IPC sockets: no warning about TCP without encryption
    assert "without encryption" not in capfd.readouterr().err


def test_a_static_playground_keeps_its_column_widths_and_no_empty_frame() -> None:
    hook = load_hook()
    states = {
        "play": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_c", "IPY_MODEL_r"]}},
        "c": {
            "model_name": "VBoxModel",
            "state": {"children": ["IPY_MODEL_s"], "layout": "IPY_MODEL_cl"},
        },
        "cl": {"model_name": "LayoutModel", "state": {"width": "420px", "min_width": "420px"}},
        "s": {"model_name": "IntSliderModel", "state": {"description": "clients", "value": 1}},
        "r": {
            "model_name": "VBoxModel",
            "state": {"children": ["IPY_MODEL_h", "IPY_MODEL_hidden"], "layout": "IPY_MODEL_rl"},
        },
        "rl": {"model_name": "LayoutModel", "state": {"width": "450px", "overflow": "visible"}},
        "h": {"model_name": "HTMLModel", "state": {"value": "<span>calls 9</span>"}},
        # a helper that only decorates the live page (the playground's slider names)
        "hidden": {
            "model_name": "AnyModel",
            "state": {"_esm": "export default { render({ el }) { el.style.display = 'none'; } }"},
        },
    }
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("playground()")
    view = {"model_id": "play", "version_major": 2, "version_minor": 0}
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"application/vnd.jupyter.widget-view+json": view}
        )
    ]
    nb.cells = [cell]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": states}}
    hook.make_widgets_static(nb)
    shown = nb.cells[0].outputs[0]["data"]["text/html"]
    # the columns keep their widths as bounds, so the numbers wrap inside theirs instead of
    # widening the row past the page; the row wraps on a narrow page
    assert 'flex-direction:column;gap:8px;max-width:420px"' in shown
    assert 'flex-direction:column;gap:8px;max-width:450px"' in shown
    assert "flex-direction:row;gap:8px;flex-wrap:wrap" in shown
    # an iframe is as tall as what it draws (nothing, for the helper), not a fixed minimum
    assert "min-height" not in shown and "ResizeObserver" in shown


def toc_links(items: object) -> list[tuple[str, str]]:
    """(title, id) of every entry of a page's table of contents, depth first."""
    found = []
    for item in items:  # type: ignore[attr-defined]
        found.append((item.title, item.id))
        found.extend(toc_links(item.children))
    return found


@pytest.mark.slow
def test_a_notebook_pages_contents_keep_inline_code_and_link_to_its_headings(
    tmp_path: Path,
) -> None:
    from mkdocs_jupyter import convert

    hook = load_hook()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": PYTHON3})
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 12 · Structured outputs\n\nText."),
        nbformat.v4.new_markdown_cell("## The whole column, with `nbagent.map`\n\nMore."),
        nbformat.v4.new_markdown_cell("### `nbagent.guard`: one layer & its `<pace>`"),
        nbformat.v4.new_code_cell("1 + 1"),
        nbformat.v4.new_markdown_cell("## What the reasks cost"),
    ]
    # a heading in a cell's output is the output's, not a section of the notebook
    nb.cells[3].outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": "<h2 id='x'>Output</h2>"})
    ]
    path = tmp_path / "12_structured_outputs.ipynb"
    nbformat.write(nb, path)
    body = convert.nb2html(str(path), execute=False, theme="light", include_requirejs=False)
    page = FakePage("notebooks/12_structured_outputs.ipynb")
    assert hook.on_page_content(body, page=page, config=None, files=None) == body
    links = toc_links(page.toc)
    assert [title for title, _ in links] == [
        "12 · Structured outputs",
        "The whole column, with nbagent.map",
        "nbagent.guard: one layer &amp; its &lt;pace&gt;",
        "What the reasks cost",
    ]
    # every entry links to an id a heading of the page has
    ids = set(re.findall(r'<h[1-6][^>]*\bid="([^"]+)"', body))
    assert {anchor for _, anchor in links} <= ids
    assert links[1][1] == "the-whole-column-with-nbagentmap"
    # nested as the levels are: the h1 holds the h2s, the h3 sits under its h2
    top = list(page.toc)
    assert len(top) == 1 and [c.title for c in top[0].children] == [
        "The whole column, with nbagent.map",
        "What the reasks cost",
    ]
    assert [c.id for c in top[0].children[0].children] == [links[2][1]]
