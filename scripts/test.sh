#!/usr/bin/env bash
# Every check from nothing: set up .venv with the dev extras, then lint, type-check, run the
# test suite, build the docs (which executes the notebooks), check the release and run the
# benchmarks in their short mode.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export PATH="$PWD/.venv/bin:$PATH"
export MPLBACKEND=Agg

# -- the other Pythons (noxfile.py: tests-3.10 ... tests-3.13), beside the main run -------------
# Every supported Python but .venv's runs the suite (all but the browser tests) in a venv of its
# own made by nox with uv, in the background while the main run below goes on: the suites mostly
# wait on sockets, processes and sleeps, so they share 2 cores well. Two lanes: the first runs
# every session but the last, one after the other, from now; the second runs the last session
# once the main pytest (with the browser tests) has ended, so the machine's second core is not
# left to the first lane alone at the end. Each lane's output goes to .nox/other-pythons-N.log,
# shown when they end.
mine=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# (assigned first: under set -e, a missing interpreter's one sentence stops the script here)
sessions=$(python -c "import noxfile; print(' '.join(noxfile.sessions_besides('$mine')))")
read -r -a others <<<"$sessions"
if [ "${#others[@]}" -gt 1 ]; then
  lanes=("${others[*]:0:${#others[@]}-1}" "${others[-1]}")
else
  lanes=("${others[*]}")
fi
# A bound on a hang, not a speed check: on an idle 2-core machine the lane of two sessions took
# 26 min; the three one after the other took 34 beside a busy process (a CPU hog), so 50 min
# leaves room and the whole CI run stays inside its 90-minute limit.
OTHERS_TIMEOUT_S=${NBAGENT_OTHER_PYTHONS_TIMEOUT_S:-3000}
lane_pids=()
start_lane() {  # start_lane N: lane N's sessions in the background
  # timeout runs nox in a process group of its own: a failure here stops all of it (the trap)
  # shellcheck disable=SC2086
  timeout "$OTHERS_TIMEOUT_S" nox --no-color -s ${lanes[$1]} >".nox/other-pythons-$1.log" 2>&1 &
  lane_pids+=("$!")
}
stop_lanes() {
  for pid in "${lane_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}
mkdir -p .nox
start_lane 0
trap stop_lanes EXIT

echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy"
mypy
.venv-pydoclint/bin/pydoclint nbagent  # docstrings (its own venv: scripts/setup.sh): every described parameter, return and field ([tool.pydoclint])
echo "== import-linter (the layers)"
lint-imports
echo "== pytest"
# pytest exits 5 when it collects no test: that is a failure here, as any non-zero code is.
pytest -q -p no:cacheprovider tests
if [ "${#lanes[@]}" -gt 1 ]; then
  start_lane 1
fi
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
echo "== the other Pythons: ${others[*]} (logs: .nox/other-pythons-*.log)"
others_rc=0
for lane in "${!lane_pids[@]}"; do
  rc=0
  wait "${lane_pids[$lane]}" || rc=$?
  cat ".nox/other-pythons-$lane.log"
  if [ "$rc" -eq 124 ]; then
    echo "the other Pythons' suites (${lanes[$lane]}) did not end within ${OTHERS_TIMEOUT_S} s" >&2
  fi
  if [ "$others_rc" -eq 0 ]; then
    others_rc=$rc
  fi
done
trap - EXIT
echo "== scripts/test.sh took $SECONDS s"
exit "$others_rc"
