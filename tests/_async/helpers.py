"""Helpers shared by the asyncio tests (generated into tests/_sync/helpers.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import AsyncTasks


async def wait_until(predicate: Any, limit: float = 10.0) -> bool:
    """Poll ``predicate`` (bounded) until true; returns its last value."""
    for _ in range(int(limit / 0.02)):
        if await predicate():
            return True
        await AsyncTasks.sleep(0.02)
    return bool(await predicate())


def skipped(reason: str) -> Any:
    """A test that is skipped with ``reason``: rebinds a name a rerun module imported."""

    @pytest.mark.skip(reason=reason)
    def test() -> None:
        """Not run here."""

    return test
