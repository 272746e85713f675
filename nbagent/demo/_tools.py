"""The tools the offline demo gives its agent: a calculator and a read-only file browser.

The file tools are confined to one folder (the package's `demo/data/` unless told otherwise):
a path that leaves it is refused, so a model cannot read the rest of the disk.
"""

from __future__ import annotations

from pathlib import Path

from .._loop._tools import Tool, tool
from ._arithmetic import safe_eval

DEMO_DATA = Path(__file__).parent / "data"
"""The folder of files the demo's file tools read (shipped in the wheel)."""


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "17 * 23 + 4".

    Args:
        expression: Numbers with + - * / // % ** and parentheses.

    Returns:
        The result, as text.
    """
    return str(safe_eval(expression))


def file_tools(root: str | Path = DEMO_DATA) -> list[Tool]:
    """`read_file` and `list_dir`, confined to `root`.

    Args:
        root: The folder they may read (and nothing outside it).

    Returns:
        The two tools.
    """
    base = Path(root).resolve()

    def inside(path: str) -> Path:
        target = (base / path).resolve()
        if target != base and base not in target.parents:
            raise PermissionError(f"{path} is outside the folder these tools may read")
        return target

    @tool
    def read_file(path: str) -> str:
        """Read a text file.

        Args:
            path: Path of the file, relative to the demo folder.

        Returns:
            The file's text (at most 100,000 characters).
        """
        target = inside(path)
        if not target.is_file():
            raise FileNotFoundError(2, "No such file", path)
        return target.read_text(encoding="utf-8", errors="replace")[:100_000]

    @tool
    def list_dir(path: str = ".") -> str:
        """List the files in a folder.

        Args:
            path: Folder, relative to the demo folder.

        Returns:
            The names, one a line, folders ending in "/".
        """
        target = inside(path)
        if not target.is_dir():
            raise FileNotFoundError(2, "No such folder", path)
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return "\n".join(names) or "(empty)"

    return [read_file, list_dir]
