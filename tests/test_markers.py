"""The quick loop `pytest -m "not browser"` needs no browser: every test module that launches
Chromium or a Jupyter server is marked `browser`.

Which modules launch is read from their source (not from a list kept by hand): a module launches
when it, or a helper it imports from tests/ (`jupyter_support.launch_chromium`, `serve`), imports
Playwright or starts a subprocess whose command names Chromium or a Jupyter server (`-m
jupyterlab`, `--ServerApp.…`). Whether they are marked is asked of pytest itself: collecting
those modules with `-m "not browser"` must select none of their tests, whatever way the marker
was given (`pytestmark`, a decorator, a class).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

_SPAWN = frozenset(
    {
        "Popen",
        "run",
        "call",
        "check_call",
        "check_output",
        "create_subprocess_exec",
        "create_subprocess_shell",
        "system",
        "execv",
        "execvp",
        "spawnv",
    }
)
# a command line that starts Chromium or a Jupyter server (JupyterLab, Notebook 7)
_LAUNCHES = re.compile(
    r"chrom(e|ium)\b|jupyter[-_ ]?(lab|server|notebook)\b|\bjupyterlab\b"
    r"|-m (notebook|jupyter)\b|--(ServerApp|LabApp|NotebookApp)\.",
    re.IGNORECASE,
)


@dataclass
class _Module:
    """One parsed module of tests/: its top-level functions, constants and local imports."""

    tree: ast.Module
    functions: dict[str, ast.AST] = field(default_factory=dict)
    constants: dict[str, ast.AST] = field(default_factory=dict)
    imported: dict[str, tuple[Path, str | None]] = field(default_factory=dict)  # name -> where


def _local(name: str, base: Path) -> Path | None:
    """The file under tests/ that `import name` finds (tests/ is on pytest's path), or None."""
    parts = name.split(".")
    for candidate in (
        base.joinpath(*parts).with_suffix(".py"),
        base.joinpath(*parts, "__init__.py"),
    ):
        if candidate.is_file():
            return candidate
    return None


def _parse(path: Path, base: Path) -> _Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    mod = _Module(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            mod.functions[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    mod.constants[target.id] = node.value
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            where = _local(node.module, base)
            if where is not None:
                for alias in node.names:
                    mod.imported[alias.asname or alias.name] = (where, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                where = _local(alias.name, base)
                if where is not None:
                    mod.imported[alias.asname or alias.name.split(".")[0]] = (where, None)
    return mod


def _strings(node: ast.AST, mod: _Module, depth: int = 0) -> Iterator[str]:
    """The string constants of an expression, module-level constants it names included."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value
        elif isinstance(sub, ast.Name) and sub.id in mod.constants and depth < 3:
            yield from _strings(mod.constants[sub.id], mod, depth + 1)


def _spawns_a_launcher(call: ast.Call, mod: _Module) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in _SPAWN:
        return False
    words = [
        s for arg in [*call.args, *(k.value for k in call.keywords)] for s in _strings(arg, mod)
    ]
    return bool(_LAUNCHES.search(" ".join(words)))


class Launches:
    """Which modules and functions of a tests/ folder launch Chromium or a Jupyter server."""

    def __init__(self, base: Path = TESTS) -> None:
        self.base = base
        self._modules: dict[Path, _Module] = {}
        self._done: dict[tuple[Path, str], bool] = {}

    def module(self, path: Path) -> bool:
        """Whether importing and running `path`'s tests launches (any of its code does)."""
        mod = self._module(path)
        body = [n for n in mod.tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        if any(self._launches(n, path, mod) for n in body):
            return True
        return any(self.function(path, name) for name in mod.functions)

    def function(self, path: Path, name: str) -> bool:
        """Whether the top-level function (or class) `name` of `path` launches when called."""
        key = (path, name)
        if key not in self._done:
            self._done[key] = False  # a recursive call does not launch by itself
            mod = self._module(path)
            node = mod.functions.get(name)
            self._done[key] = node is not None and self._launches(node, path, mod)
        return self._done[key]

    def _module(self, path: Path) -> _Module:
        if path not in self._modules:
            self._modules[path] = _parse(path, self.base)
        return self._modules[path]

    def _launches(self, node: ast.AST, path: Path, mod: _Module) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import) and any(
                a.name.split(".")[0] == "playwright" for a in sub.names
            ):
                return True
            if isinstance(sub, ast.ImportFrom) and (sub.module or "").split(".")[0] == "playwright":
                return True
            if isinstance(sub, ast.Call) and _spawns_a_launcher(sub, mod):
                return True
            if isinstance(sub, ast.Name) and self._calls_a_launcher(sub.id, None, path, mod):
                return True
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and self._calls_a_launcher(sub.value.id, sub.attr, path, mod)
            ):
                return True
        return False

    def _calls_a_launcher(self, name: str, attr: str | None, path: Path, mod: _Module) -> bool:
        if attr is None and name in mod.functions and name != "":
            return self.function(path, name)
        where = mod.imported.get(name)
        if where is None:
            return False
        other, imported = where
        target = imported if imported is not None else attr
        if target is None:
            return False
        return self.function(other, target)


def not_browser(paths: list[Path]) -> list[str]:
    """The tests pytest selects from `paths` under `-m "not browser"` (the README's quick loop)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            # plugins that only cost start-up time here (nbmake's imports take seconds)
            "-p",
            "no:nbmake",
            "-p",
            "no:hypothesispytest",
            "-m",
            "not browser",
            *map(str, paths),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode in (0, 5), out.stdout + out.stderr  # 5: nothing selected
    return [line for line in out.stdout.splitlines() if "::" in line]


@pytest.mark.e2e
def test_every_module_that_launches_chromium_or_jupyter_is_marked_browser() -> None:
    launches = Launches()
    modules = [p for p in sorted(TESTS.glob("test_*.py")) if launches.module(p)]
    # the harness's own launchers are found, so the check below is not vacuous
    support = TESTS / "jupyter_support.py"
    assert launches.function(support, "launch_chromium") and launches.function(support, "serve")
    assert modules
    unmarked = not_browser(modules)
    assert not unmarked, (
        "these tests launch Chromium or a Jupyter server but are not marked browser, so "
        '`pytest -m "not browser"` runs them: ' + ", ".join(unmarked)
    )


# -- the reading itself, on small modules written for it -----------------------------------------

HELPER = """
import subprocess, sys
from pathlib import Path

CHROME = Path("/usr/bin/chromium")
SERVER_ARGS = ["--no-browser", "--ServerApp.port=0"]

def free_port():
    return 0

def start_lab(module):
    return subprocess.Popen([sys.executable, "-m", module, *SERVER_ARGS])

def browser():
    from playwright.sync_api import sync_playwright
    return sync_playwright

def through_another():
    return browser()

def run_python(code):
    return subprocess.run([sys.executable, "-c", code], check=True)
"""


@pytest.mark.parametrize(
    ("source", "launches"),
    [
        ("from helper import start_lab\ndef test_a():\n    start_lab('jupyterlab')\n", True),
        ("from helper import through_another as b\ndef test_a():\n    b()\n", True),
        ("import helper\ndef test_a():\n    helper.browser()\n", True),
        ("def test_a():\n    import playwright.sync_api\n", True),
        (
            "import subprocess\ndef test_a():\n    subprocess.Popen(['jupyter', 'lab', '--no-browser'])\n",
            True,
        ),
        (
            "from helper import free_port, run_python\ndef test_a():\n    run_python(free_port())\n",
            False,
        ),
        ("import helper\ndef test_a():\n    helper.free_port()\n", False),
        (
            "import subprocess, sys\ndef test_a():\n    subprocess.run([sys.executable, '-V'])\n",
            False,
        ),
    ],
)
def test_a_module_launches_when_it_or_a_helper_it_calls_does(
    tmp_path: Path, source: str, launches: bool
) -> None:
    (tmp_path / "helper.py").write_text(HELPER)
    module = tmp_path / "test_case.py"
    module.write_text(source)
    assert Launches(tmp_path).module(module) is launches
