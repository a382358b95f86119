"""Who owns a held handle, for every kind of handle (asyncio; the sync twin is generated).

Threads: the thread that acquired; another thread sharing the handle sees no fence, ``owned()``
False, and may not release (redis-py's ``thread_local=True`` model). asyncio: the handle, as
``asyncio.Lock``: any task of its event loop sees its fence and may release it
(tests/test_asyncio_ownership.py: through ``wait_for``, ``gather``, ``create_task``, ``shield``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)

KINDS = ["lock", "rlock", "redlock", "semaphore", "read", "write", "election"]


@dataclass
class Kind:
    """One kind of handle, driven the same way."""

    acquire: Callable[[], Awaitable[bool]]
    release: Callable[[], Awaitable[None]]
    holding: Callable[[], Any]  # the handle's current holding (its ``owner``: the acquirer)
    owned: Callable[[], Awaitable[bool]]
    free: Callable[[], Awaitable[bool]]
    fence: Callable[[], int | None]
    not_owned: type[Exception]


def _lock(handle: Any) -> Kind:
    async def free() -> bool:
        return not await handle.locked()

    return Kind(
        handle.acquire,
        handle.release,
        lambda: handle._holding,
        handle.owned,
        free,
        lambda: handle.fence,
        redlease.LockNotOwned,
    )


def _shared(handle: Any, acquire: Any, release: Any, free: Any) -> Kind:
    not_owned = handle._errors.not_owned
    return Kind(acquire, release, handle._mine, handle.owned, free, lambda: handle.fence, not_owned)


def make(kind: str, client: redis.asyncio.Redis, clients: list[redis.asyncio.Redis]) -> Kind:
    name = f"idiom:{kind}"
    if kind == "lock":
        return _lock(redlease.Lock(client, name, ttl=5.0))
    if kind == "rlock":
        return _lock(redlease.RLock(client, name, ttl=5.0))
    if kind == "redlock":
        return _lock(redlease.Redlock(clients, name, ttl=5.0))
    if kind == "semaphore":
        sem = redlease.Semaphore(client, name, 1, ttl=5.0)

        async def no_permit_taken() -> bool:
            return await sem.available() == 1

        return _shared(sem, sem.acquire, sem.release, no_permit_taken)
    rw = redlease.ReadWriteLock(client, name, ttl=5.0)
    if kind in ("read", "write"):
        side = rw.read if kind == "read" else rw.write

        async def nobody_holds() -> bool:
            info = await rw.inspect()
            return info.readers == 0 and not info.writer

        return _shared(side, side.acquire, side.release, nobody_holds)
    election = redlease.Election(client, name, ttl=5.0)

    async def campaign() -> bool:
        return await election.campaign("me")

    async def nobody_leads() -> bool:
        return await election.leader() is None

    return _shared(election, campaign, election.resign, nobody_leads)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_shared_handle_answers_for_who_holds_it(
    async_client: redis.asyncio.Redis,
    async_redlock_clients: list[redis.asyncio.Redis],
    kind: str,
) -> None:
    handle = make(kind, async_client, async_redlock_clients)
    assert await handle.acquire()
    fence = handle.fence()
    assert fence is not None and await handle.owned()  # the acquirer sees it (not vacuous)

    async def seen() -> tuple[int | None, bool]:
        return handle.fence(), await handle.owned()

    if AsyncTasks.ASYNC:  # any task of the loop: the handle's fence, and it may release
        assert await AsyncTasks.run(seen) == (fence, True)
        await AsyncTasks.run(handle.release)
    else:  # another thread: nothing of it
        assert await AsyncTasks.run(seen) == (None, False)
        with pytest.raises(handle.not_owned, match="thread"):
            await AsyncTasks.run(handle.release)
        assert handle.fence() == fence
        await handle.release()
    assert await handle.free()
