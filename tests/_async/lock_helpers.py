"""Helpers shared by the Lock and RLock tests (test_lock_*.py; generated into
tests/_sync/lock_helpers.py)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks


def keys(name: str) -> LockKeys:
    return LockKeys.build("redlease", name.encode())


async def is_free(client: redis.asyncio.Redis, name: str) -> bool:
    return int(await client.exists(keys(name).lock)) == 0


async def paused_after_the_grant(
    lock: Any, monkeypatch: pytest.MonkeyPatch, pause: float
) -> tuple[bool, bool, bool]:
    """``acquire()`` with the process paused for ``pause`` s between its first grant and its
    return: (returned True, owned at the return, taken again: its fence is above the first
    grant's)."""
    original = type(lock)._acquire
    paused: list[int] = []

    async def slow(self: Any, owner: Any, deadline: float | None) -> Any:
        holding = await original(self, owner, deadline)
        if holding is not None and not paused:
            paused.append(holding.fence)
            await AsyncTasks.sleep(pause)  # a stall, or servers slow to answer the rest
        return holding

    monkeypatch.setattr(type(lock), "_acquire", slow)
    got = await lock.acquire(timeout=10)
    return got, await lock.owned(), (lock.fence or 0) > paused[0]


def hold_until(lock: Any, condition: Any) -> Any:
    """A task body: acquire ``lock``, wait (bounded) for ``condition``, release."""

    async def run() -> None:
        await lock.acquire()
        assert await wait_until(condition)
        await lock.release()

    return run


def queued(client: redis.asyncio.Redis, name: str, n: int) -> Any:
    async def check() -> bool:
        return int(await client.zcard(keys(name).queue)) >= n

    return check
