"""Is pyproject.toml's distribution name one of our own? A name someone else holds on the package
index fails here, before a release, not when a user's `pip install` brings their package.

    python scripts/check_name.py            (exit 1 with one sentence when the name is taken)

No network: the index is not asked at test time. TAKEN lists the names known to be held by
others, checked by hand with `pip index versions NAME` and `pip download NAME --no-deps` (both
found them). PyPI also refuses a new name that is the same as a held one once normalised
(PEP 503: case, and runs of `-`, `_`, `.`) or once those separators are dropped altogether
(`nb-agent` and `nb_agent` are `nbagent`), so a name is taken when either form matches.
To choose a new name: check it with both commands (both must say it is not found), then put it
in pyproject.toml and nbagent/_core/_distribution.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

TAKEN = frozenset(
    {
        "nbagent",  # 1.1.0, "A Nullboard backup agent for Unix systems" (needs Flask)
        "nbagents",  # "a nano, minimalistic ... library for building ReACT-based AI agents"
        "bnbagent",  # an SDK for on-chain agents
    }
)
"""Names others hold on the package index (checked 2026-12-03)."""


def normalise(name: str) -> str:
    """PEP 503's form: lower case, each run of `-`, `_`, `.` one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def squashed(name: str) -> str:
    """The name without separators: what PyPI compares to refuse names too like a held one."""
    return re.sub(r"[-_.]+", "", name).lower()


def problem(name: str, taken: frozenset[str] = TAKEN) -> str | None:
    """Why `name` cannot be published as ours, or None when it is not known to be held."""
    for held in sorted(taken):
        if normalise(name) == normalise(held):
            return f"the distribution name {name!r} is taken on the package index (by {held!r})"
        if squashed(name) == squashed(held):
            return (
                f"the distribution name {name!r} is too like {held!r}, which is taken on the "
                f"package index (PyPI refuses names that differ only by '-', '_' or '.')"
            )
    return None


def project_name(root: Path = ROOT) -> str:
    """pyproject.toml's `[project] name`."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return str(project["name"])


def main(root: Path = ROOT) -> int:
    name = project_name(root)
    found = problem(name)
    if found is not None:
        print(f"{found}: choose a free one (see scripts/check_name.py)", file=sys.stderr)
        return 1
    print(f"   the distribution name {name!r} is not a taken one")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
