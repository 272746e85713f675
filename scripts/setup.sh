#!/usr/bin/env bash
# Set up a fresh machine for nbagent: a virtual environment in .venv with the package and,
# with --dev, everything the tests need (including Debian's chromium for the browser tests).
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-}"
PY="${PYTHON:-python3}"

if [ "$extras" = "--dev" ] && [ ! -x /usr/bin/chromium ]; then
  echo "== installing Debian's chromium (browser tests)"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
# uv (from PyPI, into .venv) installs what pip would, from the same index, in well under a
# minute where pip takes several: the dev extras hold Ray, JupyterLab and pyarrow.
.venv/bin/python -m pip install -q --upgrade pip uv
UV=(.venv/bin/uv pip install -q)
# Until 0.1.0 the distribution was called `nbagent` (a name someone else holds on PyPI); a .venv
# made then still has it, and two distributions installing one `nbagent` module clash.
.venv/bin/uv pip uninstall -q --python .venv/bin/python nbagent 2>/dev/null || true
if [ "$extras" = "--dev" ]; then
  echo "== installing nbagent with its dev extras"
  "${UV[@]}" --python .venv/bin/python -e '.[dev,bench]'
else
  echo "== installing nbagent"
  "${UV[@]}" --python .venv/bin/python -e .
fi

if [ "$extras" = "--dev" ] && [ ! -x .venv-litellm/bin/litellm ]; then
  # The gateway test runs a real LiteLLM proxy in front of the mock server. Its pins clash with
  # ours (mcp<2), so it lives in a venv of its own. Pinned: 1.82.7 and 1.82.8 on PyPI were
  # compromised (credential stealer); 1.82.6 is the last release known clean.
  echo "== installing the LiteLLM proxy into .venv-litellm (the gateway test)"
  "$PY" -m venv .venv-litellm
  "${UV[@]}" --python .venv-litellm/bin/python 'litellm[proxy]==1.82.6'
fi

if [ "$extras" = "--dev" ] && [ ! -x .venv-instructor/bin/instructor ]; then
  # The instructor client test (tests/test_demo_instructor.py) runs instructor against the mock.
  # Its pins clash with pydantic-ai's (jiter<0.15, where the OpenAI SDK pydantic-ai needs takes
  # jiter>=0.16), so it lives in a venv of its own.
  echo "== installing instructor into .venv-instructor (the instructor client test)"
  "$PY" -m venv .venv-instructor
  "${UV[@]}" --python .venv-instructor/bin/python 'instructor[anthropic]==1.17.0'
fi

if [ "$extras" = "--dev" ] && [ ! -x .venv-pydoclint/bin/pydoclint ]; then
  # The docstring linter (scripts/test.sh, tests/test_docstrings.py). It needs
  # docstring_parser_fork, and the anthropic SDK needs docstring-parser: both install the module
  # `docstring_parser`, and in one venv whichever is written last wins (pydoclint then cannot
  # start, or the SDK gets the fork). So it lives in a venv of its own, never beside the SDKs.
  echo "== installing pydoclint into .venv-pydoclint (the docstring linter)"
  "$PY" -m venv .venv-pydoclint
  "${UV[@]}" --python .venv-pydoclint/bin/python 'pydoclint>=0.12,<0.13'
fi

if [ "$extras" = "--dev" ] && [ ! -d tests/node_modules/axe-core ]; then
  # axe-core, the accessibility checker the browser tests inject into pages (pinned, locked)
  echo "== installing the browser tests' JavaScript (npm ci in tests/)"
  (cd tests && npm ci --no-audit --no-fund --silent)
fi
