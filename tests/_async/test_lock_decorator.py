"""A Lock as a decorator: its calls run one at a time, the wrong kind of function refused
(asyncio; tests/_sync/test_lock_decorator.py is generated)."""

from __future__ import annotations

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests.support import AsyncTasks, a_coroutine_function, a_plain_function

pytestmark = pytest.mark.timeout(60)


async def test_a_lock_decorates_a_function(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "decorated", timeout=5)
    inside: list[bool] = []

    @lock
    async def double(x: int) -> int:
        """Doubles."""
        inside.append(await lock.owned())
        return x * 2

    assert await double(21) == 42
    assert inside == [True]  # it ran holding the lock
    assert not await lock.locked()  # and released it after
    assert (double.__name__, double.__doc__) == ("double", "Doubles.")


async def count_with(decorate: bool, async_client: redis.asyncio.Redis) -> int:
    """Eight callers each add 1 to a counter, read-modify-write with a pause in between."""
    lock = redlease.Lock(async_client, "decorated-counter", timeout=30)
    await async_client.set("decorated-counter", 0)

    async def add() -> None:
        value = int(await async_client.get("decorated-counter") or 0)
        await AsyncTasks.sleep(0.01)
        await async_client.set("decorated-counter", value + 1)

    step = lock(add) if decorate else add
    await AsyncTasks.gather(*[step] * 8)
    return int(await async_client.get("decorated-counter") or 0)


async def test_decorated_calls_run_one_at_a_time(async_client: redis.asyncio.Redis) -> None:
    assert await count_with(True, async_client) == 8


async def test_twin_undecorated_calls_lose_updates(async_client: redis.asyncio.Redis) -> None:
    assert await count_with(False, async_client) < 8


async def test_a_lock_refuses_to_decorate_the_other_kind_of_function(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "decorated-wrong")
    wrong = a_plain_function if AsyncTasks.ASYNC else a_coroutine_function
    with pytest.raises(TypeError, match="decorates"):
        lock(wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decorates a function"):
        lock(42)  # type: ignore[arg-type]
