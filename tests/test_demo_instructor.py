"""instructor against the mock: its JSON modes (`Mode.JSON`: `response_format: json_object` and
the schema in the system prompt; `MD_JSON`: the schema in the prompt and the answer asked for in
a ```json fence; `ANTHROPIC_JSON`: the schema in Anthropic's `system`) get a valid answer from the
demo model the first time, its tool and native modes (`TOOLS`, `JSON_SCHEMA`,
`ANTHROPIC_TOOLS`) still do, and its reask after an answer off the schema is read as one.

instructor runs in `.venv-instructor` (its pins clash with pydantic-ai's: see
tests/instructor_client.py), in a subprocess talking to a `MockServer` of this process over
real HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent.mock import MockServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a subprocess (instructor starts in seconds)

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv-instructor" / "bin" / "python"
CLIENT = Path(__file__).with_name("instructor_client.py")
PROMPT = "I love this kettle: it boils fast and looks great."
JSON_MODES = ["JSON", "MD_JSON", "ANTHROPIC_JSON"]
OTHER_MODES = ["TOOLS", "JSON_SCHEMA", "ANTHROPIC_TOOLS"]


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with MockServer() as s:
        yield s


@pytest.fixture(scope="module")
def answers(server: MockServer) -> dict[str, Any]:
    """Each ask's answer (a review and its text, or an error) and the requests it made, by tag:
    the mode, or `reask-` and the mode for a prompt with the demo's schema_mismatch marker."""
    assert PYTHON.exists(), (
        f"{PYTHON} is missing: run `bash scripts/setup.sh --dev`, which installs instructor "
        "into .venv-instructor"
    )
    spec = [[m, m, PROMPT] for m in JSON_MODES + OTHER_MODES]
    spec += [[f"reask-{m}", m, f"{PROMPT} [demo:schema_mismatch]"] for m in JSON_MODES]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [str(PYTHON), str(CLIENT), server.url, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=300,  # a bound on a hang; the run takes seconds
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["tag"] for line in lines] == [tag for tag, _, _ in spec], done.stdout
    for line in lines:
        line["requests"] = [
            r for r in server.requests if r.headers.get("x-test-ask") == line["tag"]
        ]
    return {line["tag"]: line for line in lines}


@pytest.mark.parametrize("mode", JSON_MODES + OTHER_MODES)
def test_every_mode_gets_a_valid_answer_the_first_time(answers: dict[str, Any], mode: str) -> None:
    answer = answers[mode]
    assert "error" not in answer, answer["error"]
    review = answer["review"]
    assert review["sentiment"] == "positive" and review["stars"] >= 4  # the demo read the words
    assert len(answer["requests"]) == 1  # no reask


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if system is not None:  # Anthropic's field: a string or text blocks
        return system if isinstance(system, str) else " ".join(b["text"] for b in system)
    return " ".join(m["content"] for m in body["messages"] if m["role"] == "system")


@pytest.mark.parametrize("mode", JSON_MODES)
def test_the_json_modes_send_the_schema_in_the_prompt_alone(
    answers: dict[str, Any], mode: str
) -> None:
    (request,) = answers[mode]["requests"]
    body = request.body
    assert "tools" not in body and "tool_choice" not in body
    assert "json_schema" in _system_text(body) and '"sentiment"' in _system_text(body)
    if mode == "JSON":
        assert body["response_format"] == {"type": "json_object"}  # a JSON object, no schema
    else:
        assert "response_format" not in body and "output_config" not in body
    if mode == "MD_JSON":
        assert "```json codeblock" in body["messages"][-1]["content"]


@pytest.mark.parametrize("mode", JSON_MODES)
def test_the_answer_is_fenced_only_where_a_fence_was_asked_for(
    answers: dict[str, Any], mode: str
) -> None:
    text = answers[mode]["text"]
    if mode == "MD_JSON":
        assert text.startswith("```json\n") and text.endswith("\n```")
        text = text.removeprefix("```json\n").removesuffix("\n```")
    review = json.loads(text)  # Mode.JSON reads the whole text as JSON: nothing around it
    assert review == answers[mode]["review"]
    assert "codeblock" not in review["summary"]  # the format request is not the content


@pytest.mark.parametrize("mode", JSON_MODES)
def test_a_reask_after_an_answer_off_the_schema_is_answered_validly(
    answers: dict[str, Any], mode: str
) -> None:
    answer = answers[f"reask-{mode}"]
    assert "error" not in answer, answer["error"]
    first, second = answer["requests"]  # the answer off the schema, then instructor's reask
    reask = json.dumps(second.body["messages"][len(first.body["messages"]) :])
    assert "validation error" in reask
    # read as a reask of the first question, not as a new one: the review is still the kettle's
    assert answer["review"]["sentiment"] == "positive"
