"""Set the repository's public URL: in its one setting, and in the files that must quote it.

    python scripts/set_repo_url.py https://github.com/acme/nbagent

Until a URL is set, nothing a reader sees names a repository that does not exist: pyproject.toml
has no `[project.urls]` (so PyPI shows no link), the docs' header has no repository link (and
Material for MkDocs calls no GitHub API), the changelog's version headings have no compare
links, and the README says how to open the notebooks on Binder from a copy of its own instead
of showing a badge. Setting the URL brings each of them back:

- `[project.urls]` in pyproject.toml (`Repository`, `Changelog`): the setting; the docs read it
  (docs/_hooks/repo_url.py);
- the README's Binder badge, between `<!-- binder -->` and `<!-- /binder -->`;
- the changelog's link definitions at its end, one per version heading (Keep a Changelog).

Run it again to change the URL. `places(root)` reads what each file holds; tests/test_release.py
checks that they agree, unset or set.
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
URL = re.compile(r"https://github\.com/([\w.-]+)/([\w.-]+)")
BINDER_START, BINDER_END = "<!-- binder -->", "<!-- /binder -->"
BINDER_BLOCK = re.compile(re.escape(BINDER_START) + r"\n(.*?)\n" + re.escape(BINDER_END), re.S)
BINDER_PATH = "HEAD?urlpath=lab/tree/notebooks/01_quickstart.ipynb"
BINDER_BADGE = re.compile(r"mybinder\.org/v2/gh/([\w.-]+/[\w.-]+)/")
# Without a repository: how a reader gets Binder to build a copy of their own.
BINDER_UNSET = (
    "On Binder: push this repository to GitHub, enter its URL at "
    "[mybinder.org](https://mybinder.org) and `lab/tree/notebooks/01_quickstart.ipynb` as the "
    "path to open (`binder/` holds what Binder builds from); no key is needed."
)
VERSION_HEADING = re.compile(r"^## \[([^\]]+)\]", re.M)
LINK_DEFINITION = re.compile(r"^\[[^\]]+\]: https?://\S+\n?", re.M)


class UsageError(Exception):
    """A URL this script cannot use (one sentence)."""


def repository_url(pyproject_text: str) -> str | None:
    """`[project.urls] Repository`, or None while no repository URL is set."""
    project = tomllib.loads(pyproject_text).get("project", {})
    url = project.get("urls", {}).get("Repository")
    return str(url) if url else None


def places(root: Path = ROOT) -> dict[str, str | None]:
    """The repository each file names (`owner/name`), or None where it names none."""

    def owner_name(url: str | None) -> str | None:
        match = URL.fullmatch(url.rstrip("/")) if url else None
        return f"{match[1]}/{match[2]}" if match else url

    readme = (root / "README.md").read_text(encoding="utf-8")
    badges = set(BINDER_BADGE.findall(readme))
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    linked = {f"{m[1]}/{m[2]}" for m in URL.finditer("".join(LINK_DEFINITION.findall(changelog)))}
    return {
        "pyproject.toml": owner_name(
            repository_url((root / "pyproject.toml").read_text(encoding="utf-8"))
        ),
        "README.md": ", ".join(sorted(badges)) or None,
        "CHANGELOG.md": ", ".join(sorted(linked)) or None,
    }


def _pyproject(text: str, url: str) -> str:
    section = f'[project.urls]\nRepository = "{url}"\nChangelog = "{url}/blob/HEAD/CHANGELOG.md"\n'
    current = re.search(r"^\[project\.urls\]\n(?:[^\n\[][^\n]*\n)*", text, re.M)
    if current is not None:
        return text[: current.start()] + section + "\n" + text[current.end() :].lstrip("\n")
    anchor = re.search(r"^\[project\.optional-dependencies\]", text, re.M)
    if anchor is None:
        raise UsageError("pyproject.toml has no [project.optional-dependencies] to put it before.")
    return text[: anchor.start()] + section + "\n" + text[anchor.start() :]


def _readme(text: str, owner_name: str) -> str:
    if BINDER_BLOCK.search(text) is None:
        raise UsageError(f"README.md has no {BINDER_START} … {BINDER_END} block for the badge.")
    badge = (
        f"[![Binder](https://mybinder.org/badge_logo.svg)]"
        f"(https://mybinder.org/v2/gh/{owner_name}/{BINDER_PATH}) "
        "(JupyterLab on the quickstart notebook; no key needed)"
    )
    return BINDER_BLOCK.sub(lambda _: f"{BINDER_START}\n{badge}\n{BINDER_END}", text, count=1)


def _changelog(text: str, url: str) -> str:
    """One link per version heading: Unreleased compares with the newest release, each release
    with the one before it, and the first links its tag."""
    versions = VERSION_HEADING.findall(text)
    links = []
    for i, name in enumerate(versions):
        older = next((v for v in versions[i + 1 :] if v != "Unreleased"), None)
        this = "HEAD" if name == "Unreleased" else f"v{name}"
        target = f"compare/v{older}...{this}" if older else f"releases/tag/{this}"
        links.append(f"[{name}]: {url}/{target}\n")
    body = LINK_DEFINITION.sub("", text).rstrip("\n") + "\n"
    return body + ("\n" + "".join(links) if links else "")


def set_url(url: str, root: Path = ROOT) -> None:
    """Write `url` into pyproject.toml, README.md and CHANGELOG.md under `root`."""
    match = URL.fullmatch(url.rstrip("/"))
    if match is None:
        raise UsageError(f"{url!r} is not a GitHub repository URL (https://github.com/OWNER/NAME).")
    url = match[0]
    files = {name: root / name for name in ("pyproject.toml", "README.md", "CHANGELOG.md")}
    texts = {name: path.read_text(encoding="utf-8") for name, path in files.items()}
    new = {
        "pyproject.toml": _pyproject(texts["pyproject.toml"], url),
        "README.md": _readme(texts["README.md"], f"{match[1]}/{match[2]}"),
        "CHANGELOG.md": _changelog(texts["CHANGELOG.md"], url),
    }
    for name, text in new.items():  # every file made before any is written
        files[name].write_text(text, encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/set_repo_url.py https://github.com/OWNER/NAME")
        return 2
    try:
        set_url(argv[0])
    except UsageError as exc:
        print(f"set_repo_url: {exc}", file=sys.stderr)
        print("usage: python scripts/set_repo_url.py https://github.com/OWNER/NAME")
        return 2
    print(f"repository URL set to {argv[0].rstrip('/')} (pyproject.toml, README.md, CHANGELOG.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
