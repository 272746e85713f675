#!/usr/bin/env bash
# The offline demo from nothing: set up .venv, then run `nbagent demo` (no key, no internet).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/nbagent demo "$@"
