"""The test suite on every Python nbagent supports: `nox -s tests-3.10` … `nox -s tests-3.13`.

Each session makes its own venv in `.nox/` from nothing (with uv: seconds, not minutes, once its
cache holds the wheels), installs nbagent editable with the dev and bench extras, and runs
pytest; arguments after `--` go to pytest instead of the default
(`-m "not browser and not load" tests`).
`scripts/test.sh` runs the sessions of the Pythons other than its own `.venv`'s, beside its main
run. The interpreters are found on PATH or under pyenv (`$PYENV_ROOT/versions/3.x.*`); nothing
is downloaded, and a missing one fails its session with one sentence.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
from pathlib import Path

import nox

PYTHONS = ("3.10", "3.11", "3.12", "3.13")
"""Every Python `requires-python` admits and CI tests (keep the two in step)."""

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True
nox.options.download_python = "never"  # a missing interpreter is an error, not a download
nox.options.sessions = [f"tests-{v}" for v in PYTHONS]


def interpreter(version: str) -> str | None:
    """The newest CPython `version` on this machine: pyenv's (`versions/3.x.N`), else
    `python3.x` on PATH unless it is pyenv's shim (which fails for a version not selected)."""
    roots = {os.environ.get("PYENV_ROOT") or "", os.path.expanduser("~/.pyenv")} - {""}
    found: list[tuple[int, str]] = []
    for root in roots:
        for path in glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python3")):
            patch = re.fullmatch(rf"{re.escape(version)}\.(\d+)", Path(path).parents[1].name)
            if patch and os.access(path, os.X_OK):
                found.append((int(patch.group(1)), path))
    if found:
        return max(found)[1]
    on_path = shutil.which(f"python{version}")
    if on_path and f"{os.sep}shims{os.sep}" not in on_path:
        return on_path
    return None


def sessions_besides(mine: str) -> list[str]:
    """The sessions of every supported Python but `mine` (the one `.venv` has, which the main
    run tests); exits with one sentence if one of their interpreters is missing."""
    others = [v for v in PYTHONS if v != mine]
    missing = [v for v in others if interpreter(v) is None]
    if missing:
        raise SystemExit(
            f"Python {' and '.join(missing)} is missing on this machine, and CI tests every "
            f"Python nbagent supports ({', '.join(PYTHONS)}): install it (e.g. `pyenv install "
            f"{missing[0]}`) or put python{missing[0]} on PATH"
        )
    return [f"tests-{v}" for v in others]


@nox.session(python=list(PYTHONS))
def tests(session: nox.Session) -> None:
    """pytest on one Python (everything but the browser and load tests, which the main run has)."""
    assert isinstance(session.python, str)
    # a venv kept from before the rename still holds `nbagent` (scripts/setup.sh does the same)
    session.run_install("uv", "pip", "uninstall", "-q", "nbagent", silent=True)
    session.install("-e", ".[dev,bench]")
    session.env["MPLBACKEND"] = "Agg"
    # the load test fills the machine by design: the main run has it, once
    args = session.posargs or ["-m", "not browser and not load", "tests"]
    session.run("pytest", "-q", "-p", "no:cacheprovider", *args)


@nox.session(name="fresh-pip", python=list(PYTHONS), venv_backend="venv", reuse_venv=False)
def fresh_pip(session: nox.Session) -> None:
    """What a newcomer does: a new venv, plain `pip install -e '.[dev]'` (pip, not uv, and no
    scripts/setup.sh), then the quick loop. Its venv must hold no two distributions installing
    one module (tests/test_environment.py), whatever order pip wrote them in. Not one of the
    default sessions (pip takes minutes over the dev extras): `.venv/bin/nox -s fresh-pip-3.12`,
    pytest's arguments after `--`. The side venvs (.venv-pydoclint, .venv-litellm,
    .venv-instructor) and tests/node_modules come from `scripts/setup.sh --dev`, run once."""
    session.run("python", "-m", "pip", "install", "-q", "--upgrade", "pip")
    session.run("python", "-m", "pip", "install", "-q", "-e", ".[dev]")
    session.env["MPLBACKEND"] = "Agg"
    args = session.posargs or ["-m", "not browser and not slow", "-x", "tests"]
    session.run("pytest", "-q", "-p", "no:cacheprovider", *args)


def _resolve_interpreters() -> None:
    """Link each found interpreter as `.nox/interpreters/python3.x` and put that folder first on
    PATH, where nox looks (only those names: the rest of PATH keeps its `python`)."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".nox", "interpreters")
    os.makedirs(folder, exist_ok=True)
    for version in PYTHONS:
        link = os.path.join(folder, f"python{version}")
        path = interpreter(version)
        if path is None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(link)
            continue
        # made aside and renamed into place: several nox processes may start at once
        temp = f"{link}.{os.getpid()}"
        os.symlink(path, temp)
        os.replace(temp, link)
    os.environ["PATH"] = folder + os.pathsep + os.environ["PATH"]


_resolve_interpreters()
