"""Fences never go back, even when the server loses its counters (asyncio;
tests/_sync/test_fence_after_loss.py is generated).

A fence is max(counter + 1, the server's time in us): after FLUSHALL, or a restart without
persistence, the next fence is still larger than every fence issued before, so a fenced
store keeps refusing a paused ex-holder. The twins replay the counter alone (INCR on the
lost counter, what the scripts did before): it starts again from 1, below the store's
mark, and the store then refuses the good writer and accepts the stale one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.lock import LockKeys
from redlease._core.once import OnceKeys
from tests.support import AsyncTasks
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)

LOSSES = ["flushall", "restart-empty"]


async def lose_data(srv: RedisServer, client: redis.asyncio.Redis, loss: str) -> None:
    """The lock server forgets everything: FLUSHALL, or a restart without persistence."""
    if loss == "flushall":
        await client.flushall()
    else:
        await AsyncTasks.blocking(lambda: srv.restart(empty=True))
    assert await client.dbsize() == 0


async def retried(call: Callable[[], Awaitable[Any]]) -> Any:
    """``call()``, again if a connection the restart closed failed it (bounded)."""
    for _ in range(5):
        try:
            return await call()
        except redlease.Unavailable:
            await AsyncTasks.sleep(0.2)
    return await call()


@pytest.mark.parametrize("loss", LOSSES)
async def test_a_fenced_store_refuses_the_paused_holder_after_the_lock_server_lost_its_data(
    make_server: Any, async_client: redis.asyncio.Redis, loss: str
) -> None:
    srv = make_server()
    lock_client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=2.0)
    store = redlease.FencedStore(async_client, "invoice:9")  # the resource: another server
    try:
        lock = redlease.Lock(lock_client, "invoice:9", ttl=30.0, renew=False)
        fences = []
        for _ in range(3):
            assert await lock.acquire()
            fences.append(lock.fence or 0)
            await store.write(fences[-1], "work")
            await lock.release()
        paused = redlease.Lock(lock_client, "invoice:9", ttl=30.0, renew=False)
        assert await paused.acquire()
        old = paused.fence or 0
        await store.write(old, "before the pause")
        assert fences == sorted(set(fences)) and old > fences[-1]

        await lose_data(srv, lock_client, loss)  # the paused holder's lease is gone with it
        fresh = redlease.Lock(lock_client, "invoice:9", ttl=30.0, renew=False)
        assert await retried(lambda: fresh.acquire(blocking=False))
        assert (fresh.fence or 0) > old  # above every fence issued before the loss
        await store.write(fresh.fence, "fresh")
        with pytest.raises(redlease.StaleFence):
            await store.write(old, "stale, from the paused holder")
        assert (await store.read()).value == b"fresh"
        await fresh.release()
    finally:
        await redlease.close(lock_client)
        await lock_client.aclose()


@pytest.mark.parametrize("loss", LOSSES)
async def test_twin_the_counter_alone_starts_again_below_the_stores_mark(
    make_server: Any, async_client: redis.asyncio.Redis, loss: str
) -> None:
    """The scheme before: the fence was INCR of the counter. After the loss it answers 1, the
    store refuses the new holder's write and accepts the paused holder's stale one."""
    srv = make_server()
    lock_client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=2.0)
    store = redlease.FencedStore(async_client, "invoice:10")
    counter = LockKeys.build("redlease", b"invoice:10").fence
    try:
        lock = redlease.Lock(lock_client, "invoice:10", ttl=30.0, renew=False)
        assert await lock.acquire()
        old = lock.fence or 0
        await store.write(old, "before the pause")
        await lose_data(srv, lock_client, loss)
        counter_only = int(await retried(lambda: lock_client.incr(counter)))  # the old path
        assert counter_only == 1 < old
        with pytest.raises(redlease.StaleFence):
            await store.write(counter_only, "fresh, refused")
        await store.write(old, "stale, accepted")
        assert (await store.read()).value == b"stale, accepted"
    finally:
        await redlease.close(lock_client)
        await lock_client.aclose()


async def _semaphore(client: redis.asyncio.Redis) -> int:
    async with redlease.Semaphore(client, "fam", 2, ttl=30.0) as sem:
        return sem.fence or 0


async def _write_hold(client: redis.asyncio.Redis) -> int:
    async with redlease.ReadWriteLock(client, "fam", ttl=30.0).write as held:
        return held.fence or 0


async def _term(client: redis.asyncio.Redis) -> int:
    election = redlease.Election(client, "fam", ttl=30.0)
    assert await election.campaign("me", timeout=5)
    term = election.term or 0
    await election.resign()
    return term


@pytest.mark.parametrize("take", [_semaphore, _write_hold, _term], ids=["sem", "write", "term"])
async def test_the_family_fences_and_terms_go_on_rising_after_flushall(
    async_client: redis.asyncio.Redis, take: Callable[[redis.asyncio.Redis], Awaitable[int]]
) -> None:
    before = [await take(async_client) for _ in range(3)]
    assert before == sorted(set(before))
    await async_client.flushall()
    assert await take(async_client) > before[-1]


async def test_a_redlock_fence_goes_on_rising_after_every_server_lost_its_data(
    async_redlock_clients: list[Any],
) -> None:
    """Every server forgot the counter: none counts, and the merged fence is the latest of
    their times (acquire_reserving.lua's {1, 0, us}), above the fences issued before (the servers'
    clocks agree: one machine). Before, it was 1."""
    lock = redlease.Redlock(async_redlock_clients, "fam", ttl=10.0)
    before = []
    for _ in range(2):
        assert await lock.acquire()
        before.append(lock.fence or 0)
        await lock.release()
    for client in async_redlock_clients:
        await client.flushall()
    assert await lock.acquire()
    assert (lock.fence or 0) > before[-1] > before[0]
    await lock.release()


@pytest.mark.parametrize("loss", LOSSES)
async def test_a_once_runs_fence_goes_on_rising_after_the_server_lost_its_data(
    make_server: Any, async_client: redis.asyncio.Redis, loss: str
) -> None:
    """A Once's runs are fenced by next_fence too: the run after the loss writes, the run
    paused across it (its lease gone with the data) is refused."""
    srv = make_server()
    once_client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=2.0)
    store = redlease.FencedStore(async_client, "nightly")
    try:
        once = redlease.Once(once_client, "nightly", every=3600, ttl=30.0)
        fences = []
        for _ in range(3):
            run = await once.try_start()
            assert run is not None
            fences.append(run.fence)
            await run.fail()  # frees the name for the next run
        paused = await once.try_start()
        assert paused is not None and fences == sorted(set(fences))
        assert paused.fence > fences[-1]
        await store.write(paused.fence, "before the pause")

        await lose_data(srv, once_client, loss)
        fresh = await retried(once.try_start)
        assert fresh is not None and fresh.fence > paused.fence
        await store.write(fresh.fence, "fresh")
        with pytest.raises(redlease.StaleFence):
            await store.write(paused.fence, "stale, from the paused run")
        assert (await store.read()).value == b"fresh"
        await fresh.finish()
    finally:
        await redlease.close(once_client)
        await once_client.aclose()


@pytest.mark.parametrize("loss", LOSSES)
async def test_twin_a_once_fence_counted_in_its_hash_starts_again_below_the_stores_mark(
    make_server: Any, async_client: redis.asyncio.Redis, loss: str
) -> None:
    """The scheme before: HINCRBY of the run hash's fence field. After the loss it answers 1:
    the store refuses the new run's write and accepts the paused run's stale one."""
    srv = make_server()
    once_client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=2.0)
    store = redlease.FencedStore(async_client, "nightly")
    run_key = OnceKeys.build("redlease", b"nightly").run
    try:
        paused = await redlease.Once(once_client, "nightly", every=3600, ttl=30.0).try_start()
        assert paused is not None
        await store.write(paused.fence, "before the pause")
        await lose_data(srv, once_client, loss)
        counted = int(await retried(lambda: once_client.hincrby(run_key, "fence", 1)))  # old path
        assert counted == 1 < paused.fence
        with pytest.raises(redlease.StaleFence):
            await store.write(counted, "fresh, refused")
        await store.write(paused.fence, "stale, accepted")
        assert (await store.read()).value == b"stale, accepted"
    finally:
        await redlease.close(once_client)
        await once_client.aclose()
