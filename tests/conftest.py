"""Shared test set-up: every test starts with no rate limiter state from an earlier test."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from nbagent._loop._limiter import reset_shared_limiters

# pydantic-ai 2 supports Python 3.11 and later (the dev extra installs it only there), so its
# framework tests are not collected on 3.10; the other Pythons run them.
PYDANTIC_AI_TESTS = ["test_amplification_pydantic_ai.py", "test_demo_pydantic_ai.py"]
collect_ignore = PYDANTIC_AI_TESTS if sys.version_info < (3, 11) else []


@pytest.fixture(autouse=True)
def _fresh_shared_limiters() -> Iterator[None]:
    # Limiters are shared per provider and endpoint; a later test on a reused port must not
    # inherit an earlier test's learned rate, blocks or retry budget.
    reset_shared_limiters()
    yield
    reset_shared_limiters()
