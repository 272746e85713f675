"""Set the repository's URL in its one place, and in the files that must quote it.

    python scripts/set_repo_url.py https://github.com/<owner>/nbagent

`[project.urls]` in pyproject.toml is the setting (the docs read it); the README's Binder badge
and the changelog's compare links cannot read it, so they are rewritten here.
tests/test_release.py checks that they agree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GITHUB = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?(?=/|\"|\)|$)")
BINDER = re.compile(r"mybinder\.org/v2/gh/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", argv[0]):
        print("usage: python scripts/set_repo_url.py https://github.com/<owner>/<name>")
        return 2
    url = argv[0]
    owner_name = url.removeprefix("https://github.com/")
    pyproject = ROOT / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    start = text.index("[project.urls]")
    end = text.index("\n[", start + 1)
    section = GITHUB.sub(url, text[start:end])
    pyproject.write_text(text[:start] + section + text[end:], encoding="utf-8")
    readme = ROOT / "README.md"
    readme.write_text(
        BINDER.sub(f"mybinder.org/v2/gh/{owner_name}/", readme.read_text(encoding="utf-8")),
        encoding="utf-8",
    )
    changelog = ROOT / "CHANGELOG.md"
    lines = changelog.read_text(encoding="utf-8").splitlines(keepends=True)
    changelog.write_text(
        "".join(GITHUB.sub(url, ln) if re.match(r"\[[^\]]+\]: ", ln) else ln for ln in lines),
        encoding="utf-8",
    )
    print(f"repository URL set to {url} (pyproject.toml, README.md, CHANGELOG.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
