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
from nbagent._core._distribution import DISTRIBUTION

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
check_name = load_script("check_name")
set_repo_url = load_script("set_repo_url")


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
    # the distribution's name, which is what `pip install` takes, and not the module's
    assert cli.stdout.strip() == f"nbagent-loop {version('nbagent-loop')}"
    assert version("nbagent-loop") == nbagent.__version__


def test_the_distribution_name_is_ours_and_said_in_one_place() -> None:
    name = PYPROJECT["project"]["name"]
    assert name == DISTRIBUTION == "nbagent-loop"
    assert check_name.problem(name) is None
    assert check_name.main(ROOT) == 0


@pytest.mark.parametrize(
    ("name", "held"),
    [
        ("nbagent", "'nbagent'"),  # someone's Nullboard backup agent
        ("NBAgent", "'nbagent'"),
        ("nb-agent", "too like 'nbagent'"),  # PyPI refuses it: the same without separators
        ("nb_agent", "too like 'nbagent'"),
        ("nb.agent", "too like 'nbagent'"),
        ("nbagents", "'nbagents'"),
    ],
)
def test_the_release_check_fails_on_a_taken_name(
    tmp_path: Path, name: str, held: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    line = re.search(r'^name = "nbagent-loop".*$', text, re.M)
    assert line is not None
    (tmp_path / "pyproject.toml").write_text(
        text.replace(line.group(0), f'name = "{name}"'), encoding="utf-8"
    )
    assert check_name.main(tmp_path) == 1
    said = capsys.readouterr().err
    assert f"the distribution name {name!r}" in said and held in said
    # and the script itself, as scripts/check_release.sh runs it
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_name.py"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and held in run.stderr, run.stderr


def test_every_install_line_names_the_distribution() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    lines = [
        (page.relative_to(ROOT), line)
        for page in pages
        for line in page.read_text(encoding="utf-8").splitlines()
    ]
    installs = [(p, line) for p, line in lines if re.search(r"pip install '?nbagent\b", line)]
    assert installs, "no install line found"
    wrong = [(p, line) for p, line in installs if not re.search(r"install '?nbagent-loop", line)]
    assert wrong == []
    extras = [(p, line) for p, line in lines if re.search(r"(?<![-\w])nbagent\[", line)]
    assert extras == [], "an extra named on the other project's name"


def test_the_changelog_has_an_entry_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog")
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(nbagent.__version__)}\] - \d{{4}}-\d\d-\d\d$", text, re.M)


RELEASE_FILES = ("pyproject.toml", "README.md", "CHANGELOG.md")


def copy_release_files(dest: Path) -> Path:
    """The files that name the repository, and the script and hook that read them."""
    for name in RELEASE_FILES:
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "scripts", dest / "scripts")
    return dest


def run_set_repo_url(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "set_repo_url.py"), *args],
        capture_output=True,
        text=True,
    )


def site_repository(pyproject: Path) -> tuple[str, str] | None:
    spec = importlib.util.spec_from_file_location("repo_url_hook", ROOT / "docs/_hooks/repo_url.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    found: tuple[str, str] | None = hook.site_repository(pyproject)
    return found


def test_until_a_repository_url_is_set_nothing_names_one() -> None:
    # every place agrees: none names a repository, so no reader meets a link that goes nowhere
    assert set_repo_url.places(ROOT) == dict.fromkeys(RELEASE_FILES)
    assert site_repository(ROOT / "pyproject.toml") is None  # no header link, no GitHub API call
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert not re.search(r"^repo_url:", mkdocs, re.M), "mkdocs.yml must not repeat the URL"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert set_repo_url.BINDER_UNSET in readme  # how to open it on Binder from a copy instead
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for placeholder in ("OWNER", "<owner>", "mybinder.org/v2/gh/"):
            assert placeholder not in text, f"{page.relative_to(ROOT)} names {placeholder}"


def test_set_repo_url_brings_every_link_back(tmp_path: Path) -> None:
    root = copy_release_files(tmp_path)
    run = run_set_repo_url(root, "https://github.com/acme/nbagent")
    assert run.returncode == 0, run.stderr
    assert set_repo_url.places(root) == dict.fromkeys(RELEASE_FILES, "acme/nbagent")
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["urls"] == {
        "Repository": "https://github.com/acme/nbagent",
        "Changelog": "https://github.com/acme/nbagent/blob/HEAD/CHANGELOG.md",
    }
    assert site_repository(root / "pyproject.toml") == (
        "https://github.com/acme/nbagent",
        "acme/nbagent",
    )
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "](https://mybinder.org/v2/gh/acme/nbagent/HEAD?urlpath=lab/tree/notebooks/" in readme
    assert set_repo_url.BINDER_UNSET not in readme
    # keep-a-changelog: every version heading has its link at the bottom, newest compared with
    # the one before it
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert headings[0] == "Unreleased" and len(headings) >= 2
    for heading in headings:
        assert re.search(
            rf"^\[{re.escape(heading)}\]: https://github.com/acme/nbagent/", changelog, re.M
        )
    assert (
        f"[Unreleased]: https://github.com/acme/nbagent/compare/v{headings[1]}...HEAD" in changelog
    )
    assert (
        f"[{headings[-1]}]: https://github.com/acme/nbagent/releases/tag/v{headings[-1]}"
        in changelog
    )

    # set again: the new URL everywhere, nothing of the old one left, nothing written twice
    assert run_set_repo_url(root, "https://github.com/other/fork/").returncode == 0
    assert set_repo_url.places(root) == dict.fromkeys(RELEASE_FILES, "other/fork")
    texts = {name: (root / name).read_text(encoding="utf-8") for name in RELEASE_FILES}
    assert not any("acme" in text for text in texts.values())
    assert texts["pyproject.toml"].count("[project.urls]\n") == 1
    assert texts["README.md"].count("badge_logo.svg") == 1
    assert texts["CHANGELOG.md"].count("[Unreleased]: ") == 1
    tomllib.loads(texts["pyproject.toml"])  # still valid TOML


def test_set_repo_url_refuses_what_is_not_a_repository_url(tmp_path: Path) -> None:
    root = copy_release_files(tmp_path)
    before = {name: (root / name).read_bytes() for name in RELEASE_FILES}
    for args in (("acme",), ("https://gitlab.com/acme/nbagent",), ()):
        bad = run_set_repo_url(root, *args)
        assert bad.returncode == 2 and "usage" in bad.stdout, (args, bad.stdout)
        assert "Traceback" not in bad.stderr
    assert {name: (root / name).read_bytes() for name in RELEASE_FILES} == before


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
    (wheel,) = out.glob("nbagent_loop-*.whl")
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
