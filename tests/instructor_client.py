"""instructor asking a mock server for a `Review`: the client of tests/test_demo_instructor.py.

Run by `.venv-instructor`'s Python, not the test's: instructor pins `jiter<0.15`, which the
OpenAI SDK that pydantic-ai needs cannot have, so `scripts/setup.sh --dev` gives it a venv of its
own. Usage: `python instructor_client.py URL SPEC`, where SPEC is a JSON list of `[tag, mode,
prompt]` (`mode` an `instructor.Mode` name); each prints one JSON line, in order: the tag, the
review and the answer's text (for a tool mode, the call's arguments), or the tag and the error.
Every request of an ask carries its tag in `x-test-ask`.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

import anthropic
import instructor
import openai
from pydantic import BaseModel, Field

KEY = "sk-test-instructor-0123456789"


class Review(BaseModel):
    """A product review, read."""

    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)
    summary: str = Field(max_length=60)
    keywords: list[str] = Field(min_length=1, max_length=3)


def text_of(completion: Any) -> str:
    """The answer's text as the server sent it (Anthropic's or Chat's)."""
    if hasattr(completion, "choices"):
        message = completion.choices[0].message
        calls = message.tool_calls or []
        return str(calls[0].function.arguments if calls else message.content)
    return "".join(b.text if b.type == "text" else json.dumps(b.input) for b in completion.content)


def ask(url: str, tag: str, mode: str, prompt: str) -> tuple[Review, Any]:
    headers = {"x-test-ask": tag}
    messages: Any = [{"role": "user", "content": prompt}]
    if mode.startswith("ANTHROPIC_"):
        with anthropic.Anthropic(
            api_key=KEY, base_url=url, default_headers=headers, max_retries=0
        ) as sdk:
            claude = instructor.from_anthropic(sdk, mode=instructor.Mode[mode])
            return claude.messages.create_with_completion(
                model="demo",
                max_tokens=1024,
                messages=messages,
                response_model=Review,
                max_retries=2,
            )
    with openai.OpenAI(
        api_key=KEY, base_url=url + "/v1", default_headers=headers, max_retries=0
    ) as sdk:
        gpt = instructor.from_openai(sdk, mode=instructor.Mode[mode])
        return gpt.chat.completions.create_with_completion(
            model="demo", messages=messages, response_model=Review, max_retries=2
        )


def main() -> None:
    url, spec = sys.argv[1], json.loads(sys.argv[2])
    for tag, mode, prompt in spec:
        line: dict[str, Any] = {"tag": tag}
        try:
            review, completion = ask(url, tag, mode, prompt)
            line.update(review=review.model_dump(), text=text_of(completion))
        except Exception as exc:  # the test shows what went wrong, ask by ask
            line["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
