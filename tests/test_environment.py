"""The venv the tests run in is one a plain `pip install -e '.[dev]'` makes, in any install order.

Two distributions that install the same top-level module clash: whichever pip writes last wins,
so the venv depends on the order it was installed in. pydoclint (docstring_parser_fork) and the
anthropic SDK (docstring-parser) did exactly that with `docstring_parser`; pydoclint now has a
venv of its own (scripts/setup.sh). This test fails on the next such pair, in every venv the
suite runs in (.venv and each nox session's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib.metadata import Distribution, distributions
from pathlib import Path

import nbagent


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def module_owners(dists: Iterable[Distribution]) -> dict[str, set[str]]:
    """Each top-level module a distribution installs itself (`name.py`, an extension module, or
    `name/__init__.py`: a namespace package such as `google` or `opentelemetry` has none and is
    meant to be shared), with the distributions that install it."""
    owners: dict[str, set[str]] = {}
    for dist in dists:
        for file in dist.files or ():
            parts = file.parts
            if len(parts) == 1 and file.suffix in (".py", ".so", ".pyd"):
                top = file.name.split(".")[0]
            elif len(parts) == 2 and parts[1] == "__init__.py":
                top = parts[0]
            else:
                continue
            owners.setdefault(top, set()).add(normalised(dist.metadata["Name"]))
    return owners


def test_no_two_installed_distributions_install_the_same_module() -> None:
    shared = {top: sorted(d) for top, d in module_owners(distributions()).items() if len(d) > 1}
    assert shared == {}, (
        "these modules are installed by more than one distribution, so the venv depends on "
        f"install order: {shared}"
    )


class _Installed(Distribution):
    """A distribution known by its name and files, as a RECORD lists them, written under `root`
    (Python 3.12 and later list only the files that exist)."""

    def __init__(self, root: Path, name: str, files: list[str]) -> None:
        self._root = root
        self._name = name
        self._files = files
        for file in files:
            (root / file).parent.mkdir(parents=True, exist_ok=True)
            (root / file).write_text("")

    def read_text(self, filename: str) -> str | None:
        if filename == "METADATA":
            return f"Metadata-Version: 2.1\nName: {self._name}\nVersion: 1\n"
        if filename == "RECORD":
            return "".join(f"{f},,\n" for f in self._files)
        return None

    def locate_file(self, path: object) -> Path:
        return self._root / str(path)


def test_the_clash_that_broke_a_fresh_venv_is_found(tmp_path: Path) -> None:
    # what docstring-parser and docstring_parser_fork both install, beside two namespace packages
    dists = [
        _Installed(
            tmp_path,
            "docstring-parser",
            ["docstring_parser/__init__.py", "docstring_parser/common.py"],
        ),
        _Installed(tmp_path, "docstring_parser_fork", ["docstring_parser/__init__.py"]),
        _Installed(tmp_path, "protobuf", ["google/protobuf/__init__.py"]),
        _Installed(tmp_path, "google-genai", ["google/genai/__init__.py"]),
        _Installed(tmp_path, "six", ["six.py"]),
    ]
    owners = module_owners(dists)
    assert {top for top, d in owners.items() if len(d) > 1} == {"docstring_parser"}
    assert owners["docstring_parser"] == {"docstring-parser", "docstring-parser-fork"}
    assert "google" not in owners and owners["six"] == {"six"}


def test_the_package_is_installed_once() -> None:
    # a .venv made before the rename held `nbagent` beside `nbagent-loop` (scripts/setup.sh
    # removes it): the module must come from one distribution
    names = {normalised(d.metadata["Name"]) for d in distributions()}
    assert "nbagent-loop" in names and "nbagent" not in names
    assert nbagent.__version__
