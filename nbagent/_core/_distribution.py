"""The distribution's name on the package index, which is not the import name.

`nbagent` on PyPI is someone else's package (a Nullboard backup agent), so this one is published
as `nbagent-loop` and still imported as `import nbagent`. Everything that asks the installed
metadata (the CLI's `--version`, the spans' instrumentation version) asks for this name.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "nbagent-loop"
"""What `pip install` takes (and pyproject.toml's `[project] name`); the module is `nbagent`."""


def installed_version() -> str | None:
    """The installed distribution's version, or None in a source tree never installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None
