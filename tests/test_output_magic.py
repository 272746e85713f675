"""`%%agent --output NAME`: a structured answer in the shape of a schema from the notebook's
namespace, with the magic's fault script for structured answers (`--faults schema_mismatch`)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from pydantic import BaseModel
from test_magic import cell, magics, shell  # noqa: F401 (the magics' fixtures)

from nbagent._magic import AgentMagics


class City(BaseModel):
    name: str
    country: str


@pytest.mark.e2e
def test_output_takes_a_schema_from_the_namespace_and_prints_the_value(
    shell: InteractiveShell,  # noqa: F811
    magics: AgentMagics,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell.user_ns["City"] = City
    cell(shell, "--no-widget --tools none --output City", "Paris is in France.")
    result = shell.user_ns["_agent_result"]
    assert isinstance(result.output, City)
    out = capsys.readouterr().out
    assert "name=" in out and "country=" in out
    cell(shell, '--no-widget --output City --output-mode tool --faults "schema_mismatch"', "Lyon")
    result = shell.user_ns["_agent_result"]
    assert isinstance(result.output, City) and result.reasks == 1
    body = magics.server.requests[-1].body if magics.server else {}
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}


@pytest.mark.e2e
def test_output_mistakes_are_usage_errors(
    shell: InteractiveShell,  # noqa: F811
    magics: AgentMagics,  # noqa: F811
) -> None:
    with pytest.raises(UsageError, match="--output Nowhere: no such name"):
        cell(shell, "--no-widget --output Nowhere", "hi")
    shell.user_ns["NotASchema"] = 3
    with pytest.raises(UsageError, match="--output NotASchema: output= takes"):
        cell(shell, "--no-widget --output NotASchema", "hi")
    with pytest.raises(UsageError, match="--output-mode goes with --output"):
        cell(shell, "--no-widget --output-mode tool", "hi")
