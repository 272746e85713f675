#!/usr/bin/env bash
# Every check from nothing: set up .venv with the dev extras, then lint, type-check, run the
# test suite, build the docs (which executes the notebooks), check the release and run the
# benchmarks in their short mode.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export PATH="$PWD/.venv/bin:$PATH"
export MPLBACKEND=Agg

echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy"
mypy
echo "== import-linter (the layers)"
lint-imports
echo "== pytest"
# pytest exits 5 when it collects no test: that is a failure here, as any non-zero code is.
pytest -q -p no:cacheprovider tests
if compgen -G "notebooks/*.ipynb" >/dev/null; then
  echo "== notebooks"
  nbstripout --verify notebooks/*.ipynb
  # Executed by the docs build below (nbclient, every notebook of the folder, a failing cell
  # fails it as under nbmake), so they are not run twice.
fi
# ---- docs and release ------------------------------------------------------------------------
echo "== docs (mkdocs build --strict, with no network: executes the notebooks, checks links and anchors)"
NO_MKDOCS_2_WARNING=1 bash scripts/offline.sh mkdocs build --strict --clean
echo "== release (sdist and wheel, twine check, the wheel in a fresh venv)"
PYTHON="$PWD/.venv/bin/python" bash scripts/check_release.sh
# ---- end docs and release -------------------------------------------------------------------
if [ -f benchmarks/run.py ]; then
  echo "== benchmarks (short mode: checks they work, asserts no times)"
  python benchmarks/run.py --short
fi
