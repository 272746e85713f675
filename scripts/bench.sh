#!/usr/bin/env bash
# The benchmarks, from nothing: set up .venv with the dev and bench extras (anthropic and
# tenacity, the comparators), then run every benchmark in full. Arguments go to
# benchmarks/run.py (e.g. --short, --only contention, --write /tmp/bench.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
echo "== installing nbagent with its dev and bench extras"
.venv/bin/python -m pip install -q -e '.[dev,bench]'
echo "== benchmarks"
exec .venv/bin/python benchmarks/run.py "$@"
