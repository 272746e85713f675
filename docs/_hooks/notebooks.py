"""mkdocs hook: the notebooks in notebooks/ as pages, executed at build time, widgets made static.

Each notebook is executed offline with nbclient (the demo model needs no key and no network),
in a scratch directory so the files it writes stay out of the tree. A cell that raises fails
the build, as under nbmake, unless the cell is tagged `raises-exception`. mkdocs-jupyter then
renders the executed copy.

A widget needs a live kernel, and nbconvert's own widget embedding loads a widget manager from a
CDN. Instead each widget output is replaced by static HTML built from the widget state nbclient
saved: the timeline becomes the page `nbagent.notebook.export_html` writes (its own ES module
and CSS, no URL of any kind), in an iframe; other anywidgets are drawn the same way from their
saved `_esm`/`_css`; boxes show their children, an Output widget its outputs. The notebook list
comes from the folder, so a new notebook appears without editing mkdocs.yml, and so does the
list on the home page (the line `<!-- notebooks: ... -->` of docs/index.md is replaced by it).

The kernels use matplotlib's inline backend (whatever MPLBACKEND the build runs under), so a cell
ending in `plt.show()` keeps its figure, and IPC sockets in the scratch directory instead of TCP
on loopback. `figure_watch.py` runs in each kernel and counts the figures every cell makes; a
notebook page on which such a cell shows no image fails the build, naming the notebook and cell.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.toc import get_toc

log = logging.getLogger("mkdocs.hooks.notebooks")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
CACHE = ROOT / ".cache" / "docs-notebooks"
NAV_TITLE = "Notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
TIMEOUT_S = 600
PARALLEL = 2

# nbclient records a widget's updates only while the cell that displayed it runs; a widget fed
# by a background task (agent.start, start_map) would keep its first picture. A last, hidden cell
# sends every widget's state again, which nbclient records, and is removed before rendering.
RESEND_STATE = """
import ipywidgets as _ipw
_all = getattr(_ipw.widgets.widget, "_instances", None) or getattr(_ipw.Widget, "widgets", {})
for _widget in list(_all.values()):
    _widget.send_state()
"""

FIGURE_WATCH = Path(__file__).with_name("figure_watch.py")
FIGURES_KEY = "docs_figures"  # cell metadata: how many figures the cell made when executed
# The last hidden cell reports what figure_watch.py counted: {execution count: figures}.
REPORT_FIGURES = "import json as _json\nprint(_json.dumps(_nbagent_docs_figures))"
INLINE = "module://matplotlib_inline.backend_inline"
NOTEBOOK_LIST = re.compile(r"^<!-- notebooks:.*-->$", re.M)
PROMPT = re.compile(r'jp-InputPrompt jp-InputArea-prompt">In(?:\s|&nbsp;)*\[(\d+)\]:')
IMAGE = re.compile(r"<img\b|&lt;img\b")  # a PNG output, or one inside a widget's static page
MARKDOWN_CELL = '<div class="jp-Cell jp-MarkdownCell'


_executed: dict[str, Path] = {}


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Fill the nav section titled "Notebooks" with every notebook of the folder, in order."""
    entries = [{_title(p): f"notebooks/{p.name}"} for p in _notebooks()]
    for i, item in enumerate(config.nav or []):
        if isinstance(item, dict) and NAV_TITLE in item:
            config.nav[i] = {NAV_TITLE: entries}
    return config


def notebook_list() -> str:
    """The home page's list of notebooks: a link per notebook of the folder, titled by its own
    heading, in order."""
    return "\n".join(f"- [{_title(p)}](notebooks/{p.name})" for p in _notebooks())


def on_page_markdown(markdown: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    """Write the notebook list where a page asks for it (`<!-- notebooks: ... -->`)."""
    if NOTEBOOK_LIST.search(markdown) is None:
        return markdown
    return NOTEBOOK_LIST.sub(lambda _: notebook_list(), markdown)


def _title(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def on_pre_build(config: MkDocsConfig) -> None:
    """Execute every notebook (two at a time), or take the copy executed from the same sources."""
    CACHE.mkdir(parents=True, exist_ok=True)
    salt = _source_hash()
    todo: list[tuple[Path, Path]] = []
    for path in _notebooks():
        key = hashlib.sha256(salt + path.read_bytes()).hexdigest()[:16]
        out = CACHE / f"{path.stem}-{key}" / "notebooks" / path.name
        _executed[path.name] = out
        if not out.exists():
            todo.append((path, out))
    for stale in CACHE.iterdir():  # executed from sources that have changed since
        if stale.is_dir() and stale not in {p.parent.parent for p in _executed.values()}:
            shutil.rmtree(stale, ignore_errors=True)
    if todo:
        asyncio.run(_execute_all(todo))


def _source_hash() -> bytes:
    """What an executed notebook depends on besides itself: the package's sources, and this
    hook (the copy kept is the one with its widgets made static)."""
    digest = hashlib.sha256(Path(__file__).read_bytes() + FIGURE_WATCH.read_bytes())
    for path in sorted((ROOT / "nbagent").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".js", ".css", ".json", ".txt", ".md"):
            digest.update(path.relative_to(ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.digest()


async def _execute_all(todo: list[tuple[Path, Path]]) -> None:
    gate = asyncio.Semaphore(PARALLEL)

    async def one(src: Path, out: Path) -> None:
        async with gate:
            await _execute(src, out)

    await asyncio.gather(*(one(src, out) for src, out in todo))


async def _execute(src: Path, out: Path) -> None:
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from traitlets.config import Config

    nb = nbformat.read(src, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(RESEND_STATE))
    nb.cells.append(nbformat.v4.new_code_cell(REPORT_FIGURES))
    log.info("executing %s", src.name)
    # the inline backend whatever the build runs under (scripts/test.sh exports MPLBACKEND=Agg,
    # under which plt.show() draws nothing)
    env = {**os.environ, "MPLBACKEND": INLINE}
    try:
        with tempfile.TemporaryDirectory(prefix="nbagent-docs-") as scratch:
            # IPC sockets in the scratch folder: no TCP port, and none of ipykernel's warnings
            # about TCP without encryption
            ipc = {"transport": "ipc", "ip": os.path.join(scratch, "kernel")}
            client = NotebookClient(
                nb,
                config=Config({"KernelManager": ipc}),
                timeout=TIMEOUT_S,
                kernel_name="python3",
                resources={"metadata": {"path": scratch}},
                store_widget_state=True,
                extra_arguments=[f"--IPKernelApp.exec_files={FIGURE_WATCH}"],
            )
            await client.async_execute(env=env)
    except CellExecutionError as exc:
        raise PluginError(f"notebook {src.name} failed while the docs were built:\n{exc}") from exc
    report = nb.cells.pop()
    nb.cells.pop()
    _mark_figures(nb, report)
    make_widgets_static(nb)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    tmp.replace(out)


def _mark_figures(nb: Any, report: Any) -> None:
    """Note on each cell how many figures it made (from figure_watch.py's count)."""
    outputs = report.get("outputs", [])
    text = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    made = {int(k): v for k, v in json.loads(text or "{}").items()}
    for cell in nb.cells:
        count = made.get(cell.get("execution_count") or -1) if cell.cell_type == "code" else None
        if count:
            cell.metadata[FIGURES_KEY] = count


def lost_figures(nb: Any, page_html: str) -> list[str]:
    """The cells that made a figure but show no image on the built page, as sentences."""
    chunks = PROMPT.split(page_html)  # text, count, the cell's input and outputs, count, ...
    shown = {
        int(n): bool(IMAGE.search(body.split(MARKDOWN_CELL, 1)[0]))  # up to the next text cell
        for n, body in zip(chunks[1::2], chunks[2::2], strict=True)
    }
    lost = []
    for index, cell in enumerate(nb.cells):
        count = cell.metadata.get(FIGURES_KEY) if cell.cell_type == "code" else None
        if count and not shown.get(cell.get("execution_count") or -1, False):
            first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
            lost.append(
                f"cell {index + 1} (In [{cell.get('execution_count')}], {first.strip()[:60]!r}) "
                f"made {count} figure{'s' if count > 1 else ''} but the page shows no image"
            )
    return lost


@event_priority(100)  # before mkdocs-jupyter wraps the notebook files
def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each executed notebook as `notebooks/<name>.ipynb`."""
    for name, path in _executed.items():
        files.append(
            File(
                f"notebooks/{name}",
                src_dir=str(path.parent.parent),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    return files


_DOCS_LINK = re.compile(r'href="\.\./docs/([^"#]+?)\.md(#[^"]*)?"')


def site_links(html_text: str, directory_urls: bool = True) -> str:
    """A notebook's links to the docs as they are in the repository (`../docs/guide/x.md`, which
    JupyterLab and Binder open) turned into the site's (`../../guide/x/` from the notebook's
    page, `notebooks/<name>/`)."""

    def site(match: re.Match[str]) -> str:
        page, anchor = match.group(1), match.group(2) or ""
        target = f"{page}/" if directory_urls else f"{page}.html"
        return f'href="{"../../" if directory_urls else "../"}{target}{anchor}"'

    return _DOCS_LINK.sub(site, html_text)


_HEADING = re.compile(r"<h([1-6])\b[^>]*?\bid=\"([^\"]+)\"[^>]*>(.*?)</h\1>", re.S)
_ANCHOR_LINK = re.compile(r'<a class="anchor-link"[^>]*>.*?</a>', re.S)
_TAG = re.compile(r"<[^>]+>")


def toc_tokens(html_text: str) -> list[dict[str, Any]]:
    """The table of contents of a rendered notebook, from its headings as they are on the page.

    mkdocs-jupyter makes its table from a Markdown copy with the inline code removed, so a
    heading such as "The whole column, with `nbagent.map`" loses its code and its link points
    to an id that no heading has. Here each text cell's heading (the ones nbconvert gave a ¶
    link) gives its own id and its whole text, code included, nested by level."""
    roots: list[dict[str, Any]] = []
    open_: list[dict[str, Any]] = []  # the last heading seen at each depth
    for level, anchor, inner in _HEADING.findall(html_text):
        if 'class="anchor-link"' not in inner:
            continue  # a heading inside a cell's output, not one of the notebook's own
        text = html.unescape(_TAG.sub("", _ANCHOR_LINK.sub("", inner))).strip()
        name = html.escape(text, quote=False)
        token = {"level": int(level), "id": html.unescape(anchor), "name": name, "children": []}
        while open_ and open_[-1]["level"] >= token["level"]:
            open_.pop()
        (open_[-1]["children"] if open_ else roots).append(token)
        open_.append(token)
    return roots


@event_priority(-100)  # after mkdocs-jupyter has rendered the notebook
def on_page_content(html_text: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    """Fail the build if a notebook cell made a figure that its page does not show; point the
    notebook's links to the docs at the site's pages; make the page's table of contents from
    its headings."""
    name = Path(page.file.src_uri).name
    if page.file.src_uri.startswith("notebooks/") and name.endswith(".ipynb"):
        page.toc = get_toc(toc_tokens(html_text))
    if page.file.src_uri.startswith("notebooks/") and name in _executed:
        html_text = site_links(html_text, config.use_directory_urls)
        lost = lost_figures(nbformat.read(_executed[name], as_version=4), html_text)
        if lost:
            raise PluginError(
                f"notebooks/{name}: a figure is missing from the built page:\n  "
                + "\n  ".join(lost)
            )
    return html_text


def on_post_build(config: MkDocsConfig) -> None:
    """Fail the build if a page still needs a live widget, or loads a script from elsewhere."""
    site = Path(config.site_dir)
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(site)
        if WIDGET_VIEW in text:
            raise PluginError(f"{where} still has a widget that needs a kernel")
        if re.search(r"<script[^>]+src=[\"']?(https?:)?//", text):
            raise PluginError(f"{where} loads a script from another site")


# ---- widgets made static -------------------------------------------------------------------


def make_widgets_static(nb: Any) -> None:
    """Replace every widget output by static HTML from the saved widget state (in place)."""
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            view = data.get(WIDGET_VIEW)
            if view is None:
                continue
            rendered = _render(view.get("model_id", ""), states)
            del data[WIDGET_VIEW]
            if rendered:
                data["text/html"] = rendered
    nb.metadata.pop("widgets", None)  # no widget manager from a CDN


def _render(model_id: str, states: dict[str, Any], depth: int = 0) -> str:
    model = states.get(model_id)
    if model is None or depth > 20:
        return ""
    state = model.get("state", {})
    name = model.get("model_name", "")
    if name == "AnyModel":
        return _anywidget(state)
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"):
        direction = "row" if name == "HBoxModel" else "column"
        children = [
            _render(str(child).removeprefix("IPY_MODEL_"), states, depth + 1)
            for child in state.get("children", [])
        ]
        inner = "".join(c for c in children if c)
        size = _layout_size(state, states)
        wrap = ";flex-wrap:wrap" if direction == "row" else ""
        style = f"display:flex;flex-direction:{direction};gap:8px{wrap}{size}"
        return f'<div style="{style}">{inner}</div>'
    if name == "OutputModel":
        return "".join(_output_html(o) for o in state.get("outputs", []))
    if name in ("HTMLModel", "HTMLMathModel"):
        return str(state.get("value", ""))
    if name == "LabelModel":
        return f"<span>{html.escape(str(state.get('value', '')))}</span>"
    if name == "ImageModel":
        return _image(model)
    if name.endswith(("SliderModel", "DropdownModel", "TextModel", "CheckboxModel")):
        return _control(state)
    return ""  # buttons do nothing on a static page


def _layout_size(state: dict[str, Any], states: dict[str, Any]) -> str:
    """A box's width as its Layout set it (the playground's columns), as a bound: without it a
    column grows to its longest line and the row runs off the page; a static control needs no
    room kept for a slider, so a minimum width is not kept."""
    layout = states.get(str(state.get("layout", "")).removeprefix("IPY_MODEL_"), {})
    sizes = layout.get("state", {}) if isinstance(layout, dict) else {}
    widths = [sizes.get(k) for k in ("max_width", "width")]
    width = next((w for w in widths if isinstance(w, str) and _CSS_LENGTH.fullmatch(w)), None)
    return f";max-width:{html.escape(width)}" if width else ""


_CSS_LENGTH = re.compile(r"[\d.]+(px|%|em|rem)")


def _image(model: dict[str, Any]) -> str:
    """An Image widget: its bytes travel as a base64 buffer beside the state."""
    for buffer in model.get("buffers", []):
        if buffer.get("path") == ["value"] and buffer.get("encoding", "base64") == "base64":
            fmt = html.escape(str(model.get("state", {}).get("format", "png")))
            return f'<img alt="figure" src="data:image/{fmt};base64,{buffer["data"]}">'
    return ""


def _control(state: dict[str, Any]) -> str:
    """A control as the value it was left at (a static page cannot move it)."""
    value = state.get("value")
    labels = state.get("_options_labels")
    if value is None and isinstance(labels, list) and isinstance(state.get("index"), int):
        value = labels[state["index"]]
    label = html.escape(str(state.get("description", "")))
    return (
        f'<div style="font-size:13px"><span style="display:inline-block;min-width:120px">'
        f"{label}</span> <b>{html.escape(str(value))}</b></div>"
    )


def _output_html(output: dict[str, Any]) -> str:
    if output.get("output_type") == "stream":
        return f"<pre>{html.escape(str(output.get('text', '')))}</pre>"
    data = output.get("data", {})
    if "image/png" in data:
        return f'<img alt="figure" src="data:image/png;base64,{data["image/png"]}">'
    if "text/html" in data:
        value = data["text/html"]
        return "".join(value) if isinstance(value, list) else str(value)
    if "text/plain" in data:
        return f"<pre>{html.escape(str(data['text/plain']))}</pre>"
    return ""


def _anywidget(state: dict[str, Any]) -> str:
    traits = state.get("state")
    if isinstance(traits, dict) and "bars" in traits and "runs" in traits:
        from nbagent.notebook import export_html

        return _iframe(export_html(traits, title="nbagent timeline"))
    return _iframe(_anywidget_page(state))


def _anywidget_page(state: dict[str, Any]) -> str:
    """Any anywidget drawn by its own ES module over its saved traits, with a model that stands
    still (`get`/`on`/`set`), the way `export_html` draws the timeline."""
    esm, css = str(state.get("_esm", "")), str(state.get("_css", ""))
    traits = {k: v for k, v in state.items() if not k.startswith("_")}
    from nbagent.notebook._export import script_json

    return f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<style>body{{margin:0}}</style><style>{css}</style></head>
<body><div id="root"></div>
<script type="application/json" id="traits">{script_json(traits)}</script>
<script type="application/json" id="esm">{script_json(esm)}</script>
<script type="module">
const data = JSON.parse(document.getElementById("traits").textContent);
const src = JSON.parse(document.getElementById("esm").textContent);
const model = {{ get: (k) => data[k], set: (k, v) => {{ data[k] = v; }}, on() {{}}, off() {{}},
  save_changes() {{}}, send() {{}} }};
const url = URL.createObjectURL(new Blob([src], {{ type: "text/javascript" }}));
const mod = await import(url);
const widget = typeof mod.default === "function" ? await mod.default() : (mod.default ?? mod);
widget.render({{ model, el: document.getElementById("root") }});
</script></body></html>"""


def _iframe(page: str) -> str:
    """A page in an iframe as tall as its content, also when the content changes (a widget that
    draws itself after loading, a conversation opened or closed); one that draws nothing takes
    no room. Its CSS and scripts stay its own."""
    fit = (
        "const f=this,d=f.contentDocument.documentElement,"
        "fit=()=>{f.style.height=Math.ceil(d.getBoundingClientRect().height)+'px'};"
        "fit();new f.contentWindow.ResizeObserver(fit).observe(d)"
    )
    return (
        f'<iframe class="nbagent-static-widget" srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;border:0;height:120px;display:block" loading="lazy" '
        f'onload="{fit}"></iframe>'
    )
