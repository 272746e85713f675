#!/usr/bin/env bash
# The release check: what a stranger who runs `pip install nbagent-loop` gets, not the editable
# checkout every other test uses. Builds the sdist and the wheel, checks them (twine, and every
# package file in the wheel), installs the wheel into a fresh virtual environment outside the
# checkout and there runs `nbagent demo` offline, loads the widget's front-end assets and
# executes the quickstart notebook. Any step that fails fails the script.
#   bash scripts/check_release.sh            (PYTHON= picks the interpreter; default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-python3}"
unset PYTHONPATH  # the fresh venv must import the installed wheel, never this tree

work="$(mktemp -d -t nbagent-release-XXXXXX)"
trap 'rm -rf "$work"' EXIT

echo "== release: the distribution name is ours (at ${SECONDS} s)"
"$PY" scripts/check_name.py
dist="$("$PY" -c 'import sys; sys.path.insert(0, "scripts"); import check_name; print(check_name.project_name())')"
stem="${dist//-/_}"  # the wheel's and the sdist's file names (nbagent_loop-0.1.0-...)

echo "== release: build the sdist and the wheel (at ${SECONDS} s)"
"$PY" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/"$stem"-*.whl)"
sdist="$(ls "$work"/dist/"$stem"-*.tar.gz)"
echo "   $(basename "$wheel"), $(basename "$sdist")"

echo "== release: twine check (at ${SECONDS} s)"
"$PY" -m twine check --strict "$wheel" "$sdist"

echo "== release: every package file is in the wheel (at ${SECONDS} s)"
"$PY" scripts/check_wheel.py "$wheel"

echo "== release: install the wheel into a fresh venv (at ${SECONDS} s)"
"$PY" -m venv "$work/venv"
V="$work/venv/bin"
"$V/python" -m pip install -q --disable-pip-version-check "$wheel" nbclient ipykernel \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; exit 1; }

cd "$work"  # away from the checkout: nothing here can shadow the installed package
version="$("$V/python" -c 'import nbagent; print(nbagent.__version__)')"
"$V/python" - "$work/venv" "$dist" <<'PY'
import sys
from importlib.metadata import version
from pathlib import Path

import nbagent

where = Path(nbagent.__file__).resolve()
assert where.is_relative_to(Path(sys.argv[1]).resolve()), f"nbagent imported from {where}"
dist = sys.argv[2]
assert version(dist) == nbagent.__version__, (version(dist), nbagent.__version__)
PY
cli="$("$V/nbagent" --version)"
[ "$cli" = "$dist $version" ] || { echo "nbagent --version says '$cli', the package $dist $version"; exit 1; }
echo "   $dist $version, imported from the venv; --version and the metadata agree"

echo "== release: nbagent demo (offline) from the wheel (at ${SECONDS} s)"
bash "$ROOT/scripts/offline.sh" "$V/nbagent" demo --out "$work/demo" >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
for f in attempts.csv timeline.png session.json report.html; do
  [ -s "$work/demo/$f" ] || { echo "nbagent demo did not write $f"; exit 1; }
done
echo "   wrote attempts.csv, timeline.png, session.json, report.html"

echo "== release: the widget's front-end assets from the wheel (at ${SECONDS} s)"
"$V/python" - <<'PY'
from importlib.resources import files

from nbagent.notebook import TimelineWidget, export_html
from nbagent.notebook._state import TimelineState

assets = files("nbagent.notebook")
js = assets.joinpath("timeline.js").read_text(encoding="utf-8")
css = assets.joinpath("timeline.css").read_text(encoding="utf-8")
assert "export default" in js and "render" in js, "timeline.js is not the widget's module"
assert ".nb-" in css, "timeline.css is not the widget's stylesheet"
widget = TimelineWidget()
assert "export default" in str(widget._esm), "the widget did not load its module"
page = export_html(TimelineState().snapshot())
assert js.replace("export default", "const nbTimeline =") in page
assert files("nbagent.demo").joinpath("data", "notes.txt").is_file(), "demo data missing"
print("   timeline.js, timeline.css, TimelineWidget, export_html, demo data")
PY

echo "== release: the quickstart notebook in the fresh venv (offline) (at ${SECONDS} s)"
MPLBACKEND=Agg bash "$ROOT/scripts/offline.sh" "$V/python" - "$ROOT/notebooks/01_quickstart.ipynb" <<'PY'
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

nb = nbformat.read(sys.argv[1], as_version=4)
with tempfile.TemporaryDirectory() as scratch:
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": scratch}}).execute()
cells = sum(1 for c in nb.cells if c.cell_type == "code")
print(f"   01_quickstart.ipynb: {cells} code cells ran")
PY
echo "== release: ok (at ${SECONDS} s)"
