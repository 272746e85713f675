#!/usr/bin/env bash
# Every check from nothing: set up .venv with the dev extras, then lint, type-check, run the
# test suite, execute the notebooks and run the benchmarks in their short mode.
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
  pytest -q -p no:cacheprovider --nbmake notebooks
fi
if [ -f benchmarks/run.py ]; then
  echo "== benchmarks (short mode: checks they work, asserts no times)"
  python benchmarks/run.py --short
fi
