"""mkdocs hook: the site's repository link comes from pyproject.toml's `[project.urls]`.

The URL lives in one place; `python scripts/set_repo_url.py URL` writes it there, in the README's
Binder badge and in the changelog's links, and tests/test_release.py checks they agree. Until it
is set the site has no repository link, so no page names a repository that does not exist, and
Material for MkDocs asks no API about one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def site_repository(pyproject: Path) -> tuple[str, str] | None:
    """The repository's URL and the name the header shows (`owner/name`), or None when unset."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    url = project.get("urls", {}).get("Repository")
    if not url:
        return None
    return url, "/".join(url.rstrip("/").split("/")[-2:])


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Set `repo_url` (and no edit links) from the package metadata, when it has one."""
    found = site_repository(ROOT / "pyproject.toml")
    if found is not None:
        config.repo_url, config.repo_name = found
        config.edit_uri = ""
    return config
