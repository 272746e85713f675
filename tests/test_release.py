"""What a release is made of: one version everywhere, a changelog entry for it, a wheel that holds
every package file (and a check that notices when one is left out), and one repository URL.

scripts/check_release.sh (run by scripts/test.sh) goes further: it installs the wheel into a
fresh venv and runs the demo, the widget's assets and a notebook there.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import types
from importlib.metadata import version
from pathlib import Path

import pytest

import nbagent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def load_script(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_wheel = load_script("check_wheel")


def test_the_version_lives_in_one_place() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project, "pyproject.toml must not repeat the version"
    assert "version" in project["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "nbagent/__init__.py"
    assert check_wheel.source_version() == nbagent.__version__


def test_version_cli_and_metadata_agree() -> None:
    cli = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from nbagent._cli import main; sys.exit(main())",
            "--version",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert cli.stdout.strip() == f"nbagent {version('nbagent')}"
    assert version("nbagent") == nbagent.__version__


def test_the_changelog_has_an_entry_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog")
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(nbagent.__version__)}\] - \d{{4}}-\d\d-\d\d$", text, re.M)
    # keep-a-changelog: every version heading has its link at the bottom
    for heading in re.findall(r"^## \[([^\]]+)\]", text, re.M):
        assert re.search(rf"^\[{re.escape(heading)}\]: https://", text, re.M), heading


def test_one_repository_url_for_the_badge_and_the_docs() -> None:
    url = PYPROJECT["project"]["urls"]["Repository"]
    owner_name = url.removeprefix("https://github.com/")
    assert owner_name.count("/") == 1, url
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    badges = re.findall(r"mybinder\.org/v2/gh/([^/]+/[^/]+)/", readme)
    assert badges, "the README has no Binder badge"
    assert set(badges) == {owner_name}, "README's Binder badge and [project.urls] disagree"
    hook = (ROOT / "docs" / "_hooks" / "repo_url.py").read_text(encoding="utf-8")
    assert '["urls"]["Repository"]' in hook  # the site's repo link reads the same setting
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert not re.search(r"^repo_url:", mkdocs, re.M), "mkdocs.yml must not repeat the URL"


def test_set_repo_url_changes_every_place(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    run = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "scripts" / "set_repo_url.py"),
            "https://github.com/acme/nbagent",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    project = tomllib.loads((tmp_path / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["urls"]["Repository"] == "https://github.com/acme/nbagent"
    assert "mybinder.org/v2/gh/acme/nbagent/" in (tmp_path / "README.md").read_text()
    changelog = (tmp_path / "CHANGELOG.md").read_text()
    assert "https://github.com/acme/nbagent/compare/" in changelog
    assert "OWNER" not in (tmp_path / "pyproject.toml").read_text()
    bad = subprocess.run(
        [sys.executable, str(tmp_path / "scripts" / "set_repo_url.py"), "acme"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "usage" in bad.stdout


def build_wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    (wheel,) = out.glob("nbagent-*.whl")
    return wheel


def copy_project(dest: Path) -> Path:
    """The files a build reads, without git (so the checker walks the tree)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "nbagent", dest / "nbagent", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return dest


@pytest.mark.slow
def test_the_wheel_holds_every_package_file(tmp_path: Path) -> None:
    wheel = build_wheel(ROOT, tmp_path)
    assert check_wheel.problems(wheel) == []
    names = check_wheel.wheel_files(wheel)
    for data in (
        "nbagent/notebook/timeline.js",
        "nbagent/notebook/timeline.css",
        "nbagent/py.typed",
    ):
        assert data in names
    assert check_wheel.wheel_version(wheel) == nbagent.__version__


@pytest.mark.slow
def test_a_wheel_missing_a_data_file_is_caught(tmp_path: Path) -> None:
    # a deliberately broken build config: the wheel leaves out the widget's stylesheet
    project = copy_project(tmp_path / "src")
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    section = '[tool.hatch.build.targets.wheel]\npackages = ["nbagent"]\n'
    assert section in text
    pyproject.write_text(
        text.replace(section, section + 'exclude = ["nbagent/notebook/timeline.css"]\n'),
        encoding="utf-8",
    )
    wheel = build_wheel(project, tmp_path / "dist")
    assert "nbagent/notebook/timeline.css" not in check_wheel.wheel_files(wheel)
    found = check_wheel.problems(wheel, project)
    assert found == ["nbagent/notebook/timeline.css is in the source tree but not in the wheel"]
    cli = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_wheel.py"), str(wheel)],
        capture_output=True,
        text=True,
        cwd=project,
    )
    # the CLI checks against this checkout's tree, which has the file: it must fail too
    assert cli.returncode == 1
    assert "timeline.css is in the source tree but not in the wheel" in cli.stderr
