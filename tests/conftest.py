"""Shared test set-up: every test starts with no rate limiter state from an earlier test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nbagent._loop._limiter import reset_shared_limiters


@pytest.fixture(autouse=True)
def _fresh_shared_limiters() -> Iterator[None]:
    # Limiters are shared per provider and endpoint; a later test on a reused port must not
    # inherit an earlier test's learned rate, blocks or retry budget.
    reset_shared_limiters()
    yield
    reset_shared_limiters()
