"""Does the wheel hold every file of the package? A file left out fails here, not on a user's
machine.

    python scripts/check_wheel.py dist/nbagent-<version>-py3-none-any.whl

Compares the wheel's `nbagent/` entries with the package's files in the source tree (the files
git tracks, or every file outside `__pycache__` when there is no git checkout), and the wheel's
metadata version with `nbagent/__init__.py`'s `__version__`. Exit 1 with what is missing.
"""

from __future__ import annotations

import email.parser
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "nbagent"


def source_files(root: Path = ROOT) -> set[str]:
    """The package's files, as paths relative to `root` (`nbagent/notebook/timeline.js`)."""
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", PACKAGE],
            cwd=root,
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        return {p for p in listed.split("\0") if p and (root / p).is_file()}
    return {
        p.relative_to(root).as_posix()
        for p in (root / PACKAGE).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    }


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist() if n.startswith(f"{PACKAGE}/")}


def wheel_version(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))
    return str(metadata["Version"])


def source_version(root: Path = ROOT) -> str:
    text = (root / PACKAGE / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if match is None:
        raise SystemExit(f'no __version__ = "..." line in {PACKAGE}/__init__.py')
    return match.group(1)


def problems(wheel: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with the wheel, one sentence each (empty: nothing)."""
    out = [
        f"{path} is in the source tree but not in the wheel"
        for path in sorted(source_files(root) - wheel_files(wheel))
    ]
    built, declared = wheel_version(wheel), source_version(root)
    if built != declared:
        out.append(f"the wheel says version {built}, nbagent/__init__.py says {declared}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/check_wheel.py PATH.whl", file=sys.stderr)
        return 2
    wheel = Path(argv[0])
    found = problems(wheel)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        return 1
    print(f"{wheel.name}: all {len(source_files())} package files, version {wheel_version(wheel)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
