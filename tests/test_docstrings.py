"""Every public callable says, in its docstring, what each parameter means, what it gives back,
which errors a caller can meet, and (for a result or a dataclass) what each field holds.

pydoclint (configured in pyproject.toml, run over the whole package by scripts/test.sh) checks
every docstring that has sections. Two things it cannot do alone, done here: know which names are
public (most are defined in `_` modules and exported from `nbagent/__init__.py`), and fail on a
docstring that is only prose, the commonest way a parameter goes undocumented. So this runs the
same pydoclint with nothing skipped and keeps what it says about the public API, as griffe (what
mkdocstrings renders) sees it. Raises and Attributes are checked here and not by pydoclint,
whose rules are narrower than what a reader needs: its Raises must equal the body's own `raise`
statements, but the section also names errors raised further down (a `ConfigError` from the
argument checks), so what is checked is that every error the body raises itself is among them;
its Attributes may hold only class-level names, but an attribute set in `__init__`
(`agent.history`) is read by users too, so every dataclass field and class attribute must be
described, and every described attribute must exist.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import griffe
import pytest
from test_docs import PUBLIC, ROOT

# in a venv of its own (scripts/setup.sh --dev): its docstring_parser_fork and the anthropic SDK's
# docstring-parser install the same module, so it is never in the venv the package lives in
PYDOCLINT = ROOT / ".venv-pydoclint" / "bin" / "pydoclint"
# `  73: DOC101: Method `Agent.__init__`: Docstring contains fewer arguments ...`
VIOLATION = re.compile(r"^\s*(\d+): (DOC\d+): (?:Function|Method|Class) `([\w.]+)`:? (.*)$")


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    loaded = griffe.load("nbagent", search_paths=[str(ROOT)], resolve_aliases=True)
    assert isinstance(loaded, griffe.Module)
    return loaded


def public_objects(package: griffe.Module) -> dict[str, griffe.Object]:
    """The public API by its public path: every exported name, and each public method and
    property of an exported class (those are on its reference page too)."""
    found: dict[str, griffe.Object] = {}
    for module_name, name in PUBLIC:
        module = package if module_name == "nbagent" else package[module_name.split(".", 1)[1]]
        alias = module[name]
        target = alias.final_target if alias.is_alias else alias
        if any(o is target for o in found.values()):
            continue  # exported twice (nbagent.ConfigError is nbagent.errors.ConfigError)
        found[f"{module_name}.{name}"] = target
        if isinstance(target, griffe.Class):
            for member_name, member in target.members.items():
                if member.is_alias or member_name.startswith("_"):
                    continue
                if not (member.is_function or "property" in member.labels):
                    continue
                found[f"{module_name}.{name}.{member_name}"] = member
    return found


def pydoclint_key(obj: griffe.Object) -> str:
    """How pydoclint names `obj` in its messages: `Function f`, `Method C.m`, `Class C`."""
    parent = obj.parent
    if isinstance(obj, griffe.Function) and isinstance(parent, griffe.Class):
        return f"{parent.name}.{obj.name}"
    return obj.name


def strict_pydoclint(files: set[Path]) -> list[tuple[Path, str, str, str]]:
    """pydoclint with the project's configuration but short docstrings checked too: for each
    violation, (file, code, pydoclint's name of the function or class, message)."""
    assert PYDOCLINT.exists(), (
        f"{PYDOCLINT} is missing: run `bash scripts/setup.sh --dev`, which installs pydoclint "
        "into .venv-pydoclint"
    )
    done = subprocess.run(
        [
            str(PYDOCLINT),
            "--config",
            str(ROOT / "pyproject.toml"),
            "--skip-checking-short-docstrings=False",
            *sorted(str(f) for f in files),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    found: list[tuple[Path, str, str, str]] = []
    current: Path | None = None
    for line in (done.stdout + done.stderr).splitlines():  # it reports on stderr
        if line and not line[0].isspace():
            current = (ROOT / line.strip()).resolve()
            continue
        m = VIOLATION.match(line)
        if m and current is not None:
            found.append((current, m.group(2), m.group(3), m.group(4)))
    return found


def public_violations(objects: dict[str, griffe.Object]) -> list[str]:
    """What strict pydoclint says about the public objects (and nothing else)."""
    by_key = {
        (Path(str(obj.filepath)).resolve(), pydoclint_key(obj)): path
        for path, obj in objects.items()
        if not isinstance(obj, griffe.Attribute)
    }
    for path, obj in objects.items():
        if isinstance(obj, griffe.Class):  # the constructor's arguments: the class docstring
            by_key[(Path(str(obj.filepath)).resolve(), f"{obj.name}.__init__")] = path
    files = {file for file, _ in by_key}
    return [
        f"{by_key[(file, key)]}: {code} {message}"
        for file, code, key, message in strict_pydoclint(files)
        if (file, key) in by_key
    ]


def test_every_public_callable_describes_its_parameters_results_and_fields(
    package: griffe.Module,
) -> None:
    objects = public_objects(package)
    assert len(objects) > 300, len(objects)  # the methods of the exported classes are in
    problems = public_violations(objects)
    assert not problems, (
        "public docstrings that do not describe what the signature has (Google style: Args:, "
        "Returns:, Yields:, Attributes: for a dataclass's fields):\n" + "\n".join(problems)
    )


def test_every_public_method_and_property_has_a_docstring(package: griffe.Module) -> None:
    # pydoclint passes a function with no docstring at all; mkdocstrings leaves it off the page
    missing = [
        f"{path} ({obj.relative_filepath}:{obj.lineno})"
        for path, obj in public_objects(package).items()
        if obj.docstring is None or not obj.docstring.value.strip()
    ]
    assert not missing, "public methods without a docstring:\n" + "\n".join(missing)


# ---- Raises ----------------------------------------------------------------------------------


def raised_here(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The error classes a function's own body raises by name (`raise ConfigError(...)`), not
    counting functions defined inside it, nor re-raising a caught error by its variable."""
    names: set[str] = set()

    def visit(n: ast.AST) -> None:
        for child in ast.iter_child_nodes(n):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                name = exc.attr if isinstance(exc, ast.Attribute) else getattr(exc, "id", "")
                if name[:1].isupper():
                    names.add(name)
            visit(child)

    visit(node)
    return names


def documented_raises(obj: griffe.Object) -> set[str]:
    """The error classes the Raises section of `obj`'s docstring names."""
    if obj.docstring is None:
        return set()
    names: set[str] = set()
    for section in obj.docstring.parse("google", warnings=False):
        if section.kind is griffe.DocstringSectionKind.raises:
            for item in section.value:
                names.add(str(item.annotation).rsplit(".", 1)[-1])
    return names


@functools.cache
def parsed(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def function_nodes(obj: griffe.Object) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The function's definition; for a class, its `__init__` (documented on the class)."""
    tree = parsed(str(obj.filepath))
    if isinstance(obj, griffe.Class):
        owner, wanted = obj.name, "__init__"
    else:
        owner = obj.parent.name if isinstance(obj.parent, griffe.Class) else None
        wanted = obj.name
    body: list[ast.stmt] = tree.body
    if owner is not None:
        body = next(
            (c.body for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == owner),
            [],
        )
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == wanted:
            yield node


def undocumented_raises(objects: dict[str, griffe.Object]) -> list[str]:
    problems = []
    for path, obj in objects.items():
        if not isinstance(obj, (griffe.Function, griffe.Class)):
            continue
        raised = set().union(*(raised_here(n) for n in function_nodes(obj)))
        missing = raised - documented_raises(obj)
        if missing:
            problems.append(f"{path}: raises {', '.join(sorted(missing))}, not in Raises:")
    return problems


def test_every_error_a_public_callable_raises_is_in_its_raises_section(
    package: griffe.Module,
) -> None:
    problems = undocumented_raises(public_objects(package))
    assert not problems, "\n".join(problems)


# ---- Attributes ------------------------------------------------------------------------------


def described_attributes(obj: griffe.Class) -> set[str]:
    """The names under the Attributes section of the class's docstring."""
    if obj.docstring is None:
        return set()
    return {
        item.name
        for section in obj.docstring.parse("google", warnings=False)
        if section.kind is griffe.DocstringSectionKind.attributes
        for item in section.value
    }


def attribute_problems(objects: dict[str, griffe.Object]) -> list[str]:
    """A public class's fields (a dataclass's, or attributes set in the class body) each need a
    description, under Attributes or as their own docstring; and each described one must exist
    (a renamed field leaves a stale line behind)."""
    problems = []
    for path, obj in objects.items():
        if not isinstance(obj, griffe.Class):
            continue
        described = described_attributes(obj)
        members = {n: m for n, m in obj.all_members.items() if not n.startswith("_")}
        fields = [
            name
            for name, member in obj.members.items()
            if not name.startswith("_")
            and not member.is_alias
            and member.is_attribute
            and "property" not in member.labels
            and ("class-attribute" in member.labels or "dataclass" in obj.labels)
        ]
        undescribed = [
            f
            for f in fields
            if f not in described
            and (obj.members[f].docstring is None or not obj.members[f].docstring.value.strip())
        ]
        if undescribed:
            problems.append(f"{path}: fields without a description: {', '.join(undescribed)}")
        stale = sorted(described - set(members))
        if stale:
            problems.append(
                f"{path}: Attributes describes what it does not have: {', '.join(stale)}"
            )
    return problems


def test_every_field_of_a_public_class_is_described(package: griffe.Module) -> None:
    problems = attribute_problems(public_objects(package))
    assert not problems, "\n".join(problems)


# ---- the checks can fail ---------------------------------------------------------------------


def write_package(tmp_path: Path, source: str) -> griffe.Module:
    folder = tmp_path / "docpkg"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(source), encoding="utf-8")
    loaded = griffe.load("docpkg", search_paths=[str(tmp_path)])
    assert isinstance(loaded, griffe.Module)
    return loaded


def test_a_parameter_missing_from_a_prose_docstring_is_found(tmp_path: Path) -> None:
    # the shape Agent had: a docstring that talks about two arguments and has no Args: section
    pkg = write_package(
        tmp_path,
        '''
        class Agent:
            """An agent. `model` is a model string; `record=` appends to a recording."""

            def __init__(self, model: str, *, record: str | None = None, cache: bool = True) -> None:
                self.model = model

            def run(self, prompt: str) -> str:
                """Run the agent.

                Args:
                    prompt: What to ask.
                """
                return prompt
        ''',
    )
    agent = pkg["Agent"]
    problems = public_violations({"docpkg.Agent": agent, "docpkg.Agent.run": agent["run"]})
    assert any(p.startswith("docpkg.Agent: DOC103") and "cache: bool" in p for p in problems), (
        problems
    )
    assert any(p.startswith("docpkg.Agent.run: DOC201") for p in problems), problems


def test_a_dataclass_field_without_a_description_is_found(tmp_path: Path) -> None:
    pkg = write_package(
        tmp_path,
        '''
        from dataclasses import dataclass

        @dataclass
        class Usage:
            """Tokens of a run.

            Attributes:
                input_tokens: Tokens sent.
            """

            input_tokens: int = 0
            output_tokens: int = 0

        class Result:
            """What a run gave.

            Attributes:
                text: The answer.
                turns: How many turns it took.
            """

            def __init__(self, text: str) -> None:
                self.text = text
        ''',
    )
    assert attribute_problems({"docpkg.Usage": pkg["Usage"], "docpkg.Result": pkg["Result"]}) == [
        "docpkg.Usage: fields without a description: output_tokens",
        "docpkg.Result: Attributes describes what it does not have: turns",
    ]


def test_an_error_raised_but_not_named_in_raises_is_found(tmp_path: Path) -> None:
    pkg = write_package(
        tmp_path,
        '''
        class ConfigError(ValueError):
            """Bad arguments."""

        def check(n: int) -> int:
            """Check `n`.

            Args:
                n: A count.

            Returns:
                `n`.

            Raises:
                TypeError: Never, in fact.
            """
            if n < 0:
                raise ConfigError("n must be positive")
            return n
        ''',
    )
    assert undocumented_raises({"docpkg.check": pkg["check"]}) == [
        "docpkg.check: raises ConfigError, not in Raises:"
    ]
