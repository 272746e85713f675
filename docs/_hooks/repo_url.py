"""mkdocs hook: the site's repository link comes from pyproject.toml's `[project.urls]`.

The URL lives in one place; `python scripts/set_repo_url.py URL` changes it there and in the
README's Binder badge, and tests/test_release.py checks they agree.
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


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Set `repo_url` (and the edit links) from the package metadata."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    url = project["urls"]["Repository"]
    config.repo_url = url
    config.repo_name = "/".join(url.rstrip("/").split("/")[-2:])
    config.edit_uri = ""
    return config
