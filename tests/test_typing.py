"""`result.output` is typed: mypy --strict on a file of typed use (tests/typing/typed_use.py,
with `assert_type`) finds no error. A change that makes `Agent("demo", output=Review)
.run_sync(...).output` `Any` again, or a plain-text output anything but `str`, fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TYPED_USE = ROOT / "tests" / "typing" / "typed_use.py"


def mypy(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            *(str(f) for f in files),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_typed_use_passes_mypy_strict() -> None:
    done = mypy(TYPED_USE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


@pytest.mark.slow
def test_a_wrong_type_is_caught(tmp_path: Path) -> None:
    # the check can fail: an output typed as what it is not is an error
    wrong = tmp_path / "wrong_use.py"
    wrong.write_text(
        "from typing_extensions import assert_type\n"
        "from nbagent import Agent\n"
        "assert_type(Agent('demo').run_sync('x').output, int)\n",
        encoding="utf-8",
    )
    done = mypy(wrong)
    assert done.returncode == 1 and "[assert-type]" in done.stdout, done.stdout
