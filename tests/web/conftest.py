"""Fixtures of the web framework tests: a metrics observer that records outage decisions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import redlease.metrics


class Decisions(redlease.metrics.Observer):
    """Records ``rate_limit_unavailable`` calls as (name, decision)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def rate_limit_unavailable(self, name: str, decision: str) -> None:
        self.calls.append((name, decision))


@pytest.fixture
def decisions() -> Iterator[Decisions]:
    """Installs a :class:`Decisions` observer for the test, then puts back the previous one."""
    observer = Decisions()
    previous = redlease.metrics.use(observer)
    yield observer
    redlease.metrics.use(previous)
