"""The package's shape: no module over 500 lines, no function over cyclomatic complexity 30, no
import cycle between nbagent's modules, not even through imports under `if TYPE_CHECKING:`.

Each rule has a list of today's offenders, a ratchet: a listed offender passes, a new one fails,
and a listed one that no longer offends fails too, so that the lists only shrink (take the entry
out when the module is split or the cycle broken). Complexity is ruff's C901 (`[tool.ruff.lint]`
in pyproject.toml, so `ruff check` catches a new offender first); its list is the files
per-file-ignores lets pass for C901, and this test holds that list to the same ratchet.

import-linter (`lint-imports`) leaves TYPE_CHECKING imports out, since they never run; this test
counts them: a cycle of names only is still two modules that cannot be read apart.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nbagent"
MAX_LINES = 500

# Modules over MAX_LINES lines today (paths under nbagent/).
LONG_MODULES: set[str] = set()

# Import cycles today (TYPE_CHECKING imports counted), each a strongly connected group of the
# children of one package, a child standing for all its submodules: the rule of import-linter's
# acyclic_siblings contract, which covers cycles between modules (siblings in their package) and
# between packages alike.
IMPORT_CYCLES: set[frozenset[str]] = set()


def module_files() -> dict[str, Path]:
    """Each nbagent module's dotted name and file."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Which nbagent modules each one imports, wherever the import stands in it."""
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules:
                        targets.add(submodule)
                    elif base in modules:
                        targets.add(base)
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.add(frozenset(group))
    return found


def sibling_graphs(graph: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """For each package, the imports between its children (a child stands for its submodules)."""
    packages: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for source, targets in graph.items():
        for target in targets:
            a, b = source.split("."), target.split(".")
            shared = 0
            while shared < min(len(a), len(b)) and a[shared] == b[shared]:
                shared += 1
            if shared < len(a) and shared < len(b):
                parent = ".".join(a[:shared])
                children = packages[parent]
                children[f"{parent}.{a[shared]}"].add(f"{parent}.{b[shared]}")
                children[f"{parent}.{b[shared]}"]  # a node even when it imports nothing
    return packages


def test_import_graph_reads_relative_and_type_checking_imports() -> None:
    graph = import_graph()
    # `from ._toolbox import Toolbox` under `if TYPE_CHECKING:`, `from ..errors import ...`
    assert "nbagent._loop._toolbox" in graph["nbagent._loop._parts"]
    assert "nbagent.errors" in graph["nbagent._core._decision"]
    assert sibling_graphs({"p.a.x": {"p.b"}, "p.b": set()}) == {"p": {"p.a": {"p.b"}, "p.b": set()}}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == {
        frozenset({"a", "b", "c"})
    }
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_no_module_over_500_lines() -> None:
    long = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    long = {name: lines for name, lines in long.items() if lines > MAX_LINES}
    new = {name: lines for name, lines in long.items() if name not in LONG_MODULES}
    assert not new, f"modules over {MAX_LINES} lines (split them by idea): {new}"
    fixed = LONG_MODULES - set(long)
    assert not fixed, f"now {MAX_LINES} lines or fewer: take them out of LONG_MODULES: {fixed}"


def test_no_import_cycle_counting_type_checking_imports() -> None:
    found = set()
    for children in sibling_graphs(import_graph()).values():
        found |= cycles(children)
    new = found - IMPORT_CYCLES
    assert not new, f"import cycles (TYPE_CHECKING imports count): {new}"
    gone = IMPORT_CYCLES - found
    assert not gone, f"these cycles are broken or changed: update IMPORT_CYCLES: {gone}"


def test_complexity_limit_lets_pass_only_todays_offenders() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lint = pyproject["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"]
    limit = lint["mccabe"]["max-complexity"]
    assert limit <= 30
    allowed = {pattern for pattern, codes in lint["per-file-ignores"].items() if "C901" in codes}
    assert all(pattern.startswith("nbagent/") for pattern in allowed), allowed
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={limit}",
            "--output-format",
            "json",
            "--exit-zero",
            "nbagent",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    offending = {
        Path(item["filename"]).resolve().relative_to(ROOT).as_posix(): item["message"]
        for item in json.loads(report.stdout)
    }
    new = {name: message for name, message in offending.items() if name not in allowed}
    assert not new, f"functions over complexity {limit}: {new}"
    fixed = allowed - set(offending)
    assert not fixed, (
        f"no longer over complexity {limit}: drop their C901 per-file-ignores: {fixed}"
    )
