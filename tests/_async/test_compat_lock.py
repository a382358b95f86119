"""redlease.compat against redis-py's documented Lock behaviours, one test per row of the table
in docs/moving-from-redis-py.md (asyncio; tests/_sync/test_compat_lock.py is generated).

Where redlease is safer than redis-py, the test has a twin running redis-py's own ``Lock``
through the same scenario, showing the unsafe outcome the check would catch.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis.asyncio
import redis.asyncio.lock
import redis.exceptions

import redlease
import redlease.asyncio
from redlease.compat import (
    AsyncLock,
    LockNotOwnedError,
    NotAcquiredError,
    NotHeldError,
    UnavailableError,
)
from tests._async.helpers import wait_until
from tests.support import AsyncTasks
from tests.topology import RedisClusterServers, RedisServer

pytestmark = pytest.mark.timeout(60)


# -- construction ---------------------------------------------------------------------------
async def test_lock_class_on_redis_lock_builds_a_redlease_lock(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = async_client.lock(
        "report", timeout=5, sleep=0.2, blocking_timeout=1, lock_class=AsyncLock
    )
    assert isinstance(lock, AsyncLock)
    assert (lock.name, lock.timeout, lock.sleep, lock.blocking_timeout) == ("report", 5, 0.2, 1)
    assert lock.blocking and lock.thread_local and lock.raise_on_release_error
    assert lock.redis is async_client
    assert isinstance(lock.lock, redlease.asyncio.Lock)
    async with lock as held:
        assert held is lock
        assert lock.fence is not None and lock.fence > 0  # (its value: the lock's business)
        assert await lock.owned()
    assert not await lock.locked()


async def test_constructor_takes_redis_pys_positional_order(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = AsyncLock(async_client, "pos", 7, 0.5, False, 2, False, False)
    assert (lock.timeout, lock.sleep, lock.blocking, lock.blocking_timeout) == (7, 0.5, False, 2)
    assert (lock.thread_local, lock.raise_on_release_error) == (False, False)


async def test_bad_arguments_are_refused_before_anything_is_sent(
    async_client: redis.asyncio.Redis,
) -> None:
    with pytest.raises(ValueError, match="timeout"):
        AsyncLock(async_client, "bad", timeout=0)
    with pytest.raises(TypeError, match="blocking_timeout"):
        AsyncLock(async_client, "bad", blocking_timeout="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sleep"):
        AsyncLock(async_client, "bad", sleep=-1)
    with pytest.raises(ValueError, match="lease"):
        AsyncLock(async_client, "bad", lease=0)
    with pytest.raises(TypeError, match="client"):
        AsyncLock(AsyncTasks.WRONG_CLIENT(), "bad")  # type: ignore[arg-type]
    lock = AsyncLock(async_client, "bad", timeout=5)
    with pytest.raises(TypeError, match="additional_time"):
        await lock.extend("1")  # type: ignore[arg-type]
    assert await async_client.dbsize() == 0


# -- acquire --------------------------------------------------------------------------------
async def test_acquire_non_blocking_and_with_a_blocking_timeout(
    async_client: redis.asyncio.Redis,
) -> None:
    holder = AsyncLock(async_client, "busy")
    other = AsyncLock(async_client, "busy")
    assert await holder.acquire()
    assert await AsyncTasks.run(lambda: other.acquire(blocking=False)) is False
    started = time.monotonic()
    assert await AsyncTasks.run(lambda: other.acquire(blocking_timeout=0.3)) is False
    assert time.monotonic() - started >= 0.25
    # redis-py: a negative blocking_timeout tries once
    assert await AsyncTasks.run(lambda: other.acquire(blocking_timeout=-1)) is False
    await holder.release()
    assert await other.acquire(blocking=False)
    await other.release()


async def test_constructor_blocking_and_blocking_timeout_are_acquires_defaults(
    async_client: redis.asyncio.Redis,
) -> None:
    holder = AsyncLock(async_client, "defaults")
    assert await holder.acquire()
    nowait = AsyncLock(async_client, "defaults", blocking=False)
    assert await AsyncTasks.run(nowait.acquire) is False
    timed = AsyncLock(async_client, "defaults", blocking_timeout=0.2)
    assert await AsyncTasks.run(timed.acquire) is False
    with pytest.raises(redis.exceptions.LockError):  # `with` raises redis-py's LockError
        await AsyncTasks.run(lambda: _enter(timed))
    await holder.release()


async def _enter(lock: AsyncLock) -> None:
    async with lock:
        pass


async def test_a_waiter_is_woken_by_the_release_not_by_its_sleep(
    async_client: redis.asyncio.Redis,
) -> None:
    holder = AsyncLock(async_client, "wake")
    waiter = AsyncLock(async_client, "wake", sleep=10)  # redis-py would poll every 10 s
    released_at: list[float] = []

    async def hold() -> None:
        assert await holder.acquire()
        await AsyncTasks.sleep(0.5)
        released_at.append(time.monotonic())
        await holder.release()

    async def wait() -> float:
        await AsyncTasks.sleep(0.1)
        assert await waiter.acquire(blocking_timeout=20)
        got = time.monotonic()
        await waiter.release()
        return got

    got, _ = await AsyncTasks.gather(wait, hold)
    assert got - released_at[0] < 5.0  # (a poll every 10 s could not be this soon)


async def test_waiters_get_the_lock_in_the_order_they_queued(
    async_client: redis.asyncio.Redis,
) -> None:
    order: list[int] = []

    async def hold() -> None:
        holder = AsyncLock(async_client, "fifo")
        assert await holder.acquire()
        await AsyncTasks.sleep(1.5)  # the three waiters queue meanwhile
        await holder.release()

    def waiter(i: int) -> Any:
        async def wait() -> None:
            await AsyncTasks.sleep(0.2 + 0.3 * i)
            lock = AsyncLock(async_client, "fifo", blocking_timeout=20)
            async with lock:
                order.append(i)
                await AsyncTasks.sleep(0.05)

        return wait

    await AsyncTasks.gather(hold, waiter(0), waiter(1), waiter(2))
    assert order == [0, 1, 2]


async def test_token_is_refused_with_a_clear_error(async_client: redis.asyncio.Redis) -> None:
    lock = AsyncLock(async_client, "token")
    with pytest.raises(ValueError, match="token"):
        await lock.acquire(token="mine")
    assert await async_client.dbsize() == 0


async def test_twin_redis_py_shared_token_lets_another_lock_release_it(
    async_client: redis.asyncio.Redis,
) -> None:
    """Why token= is refused: two redis-py locks given one token release each other's lock."""
    first = redis.asyncio.lock.Lock(async_client, "shared-token")
    second = redis.asyncio.lock.Lock(async_client, "shared-token")
    assert await first.acquire(token="same")
    assert await second.acquire(blocking=False, token="same") is False
    second.local.token = b"same"  # what a second process with the same token holds
    await second.release()
    assert not await first.locked()  # first's lock released by someone else


async def test_waiting_forever_for_a_lock_the_caller_holds_raises(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = AsyncLock(async_client, "self")
    assert await lock.acquire()
    assert await lock.acquire(blocking=False) is False
    with pytest.raises(RuntimeError, match="already held"):
        await lock.acquire()
    await lock.release()


async def test_the_holder_takes_its_lock_again_once_its_timeout_ran_out(
    async_client: redis.asyncio.Redis,
) -> None:
    """As redis-py's: a lock with a ``timeout`` is free once it ran out, for its own holder
    too, which waits no longer than that (not its whole ``blocking_timeout``)."""
    lock = AsyncLock(async_client, "self-expired", timeout=1.0)
    assert await lock.acquire()
    began = time.monotonic()
    assert await lock.acquire(blocking_timeout=6.0)
    assert time.monotonic() - began < 4.0  # the 1 s lease, with room for a loaded machine
    await lock.release()


# -- timeout --------------------------------------------------------------------------------
async def test_timeout_is_the_locks_life_not_renewed(async_client: redis.asyncio.Redis) -> None:
    lock = AsyncLock(async_client, "life", timeout=0.3)
    assert await lock.acquire()
    assert await wait_until(lambda: _free(lock), limit=5.0)
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        await lock.release()


async def _free(lock: AsyncLock) -> bool:
    return not await lock.locked()


async def test_timeout_none_is_a_renewed_lease_freed_when_its_holder_goes(
    server: RedisServer,
) -> None:
    holder_client = redis.asyncio.Redis(host=server.host, port=server.port)
    other_client = redis.asyncio.Redis(host=server.host, port=server.port)
    try:
        lock = AsyncLock(holder_client, "dies", lease=1.0)
        assert await lock.acquire()
        await AsyncTasks.sleep(2.5)  # longer than the lease: the watchdog renewed it
        assert await lock.owned()
        await redlease.asyncio.close(holder_client)  # the holder's process "dies"
        observer = AsyncLock(other_client, "dies")
        assert await wait_until(lambda: _free(observer), limit=5.0)
        assert await observer.acquire(blocking=False)
        await observer.release()
    finally:
        await redlease.asyncio.close(other_client)
        await holder_client.aclose()
        await other_client.aclose()


async def test_twin_redis_py_timeout_none_never_expires(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redis.asyncio.lock.Lock(async_client, "forever")
    assert await lock.acquire()
    assert await async_client.pttl("forever") == -1  # a dead holder keeps it for good
    await lock.release()


# -- release --------------------------------------------------------------------------------
async def test_release_of_a_lock_not_held_is_a_lock_error(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = AsyncLock(async_client, "unheld")
    with pytest.raises(redis.exceptions.LockError) as caught:
        await lock.release()
    assert not isinstance(caught.value, redis.exceptions.LockNotOwnedError)
    assert isinstance(caught.value, NotHeldError)
    assert isinstance(caught.value, redlease.LockNotOwned)
    assert caught.value.lock_name == "unheld"


async def test_release_after_the_lock_was_lost_is_lock_not_owned(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = AsyncLock(async_client, "lost", timeout=5)
    assert await lock.acquire()
    await async_client.flushall()  # the key is gone: expired, evicted, or deleted
    with pytest.raises(redis.exceptions.LockNotOwnedError) as caught:
        await lock.release()
    assert isinstance(caught.value, LockNotOwnedError)
    assert isinstance(caught.value, redlease.LockLost)


async def test_only_the_acquiring_thread_may_release(async_client: redis.asyncio.Redis) -> None:
    if AsyncTasks.ASYNC:
        pytest.skip("asyncio: who may release is redlease.asyncio.Lock's rule (docs/safety.md)")
    lock = AsyncLock(async_client, "owner", thread_local=False)
    assert await lock.acquire()
    with pytest.raises(redis.exceptions.LockError):
        await AsyncTasks.run(lock.release)
    assert await lock.owned()
    await lock.release()


async def test_twin_redis_py_thread_local_false_lets_another_thread_release(
    async_client: redis.asyncio.Redis,
) -> None:
    """redis-py's lock with ``thread_local=False``: a thread that never took it releases it."""
    if AsyncTasks.ASYNC:
        pytest.skip("the threads' twin of the test above")
    lock = redis.asyncio.lock.Lock(async_client, "any-thread", thread_local=False)
    assert await lock.acquire()
    await AsyncTasks.run(lock.release)
    assert not await lock.locked()


# -- extend and reacquire -------------------------------------------------------------------
async def test_extend_adds_or_replaces(async_client: redis.asyncio.Redis) -> None:
    lock = AsyncLock(async_client, "extend", timeout=10)
    assert await lock.acquire()
    assert await lock.extend(20) is True
    left = await lock.lock.remaining()
    assert left is not None and 25 < left <= 30
    assert await lock.extend(5, replace_ttl=True) is True
    left = await lock.lock.remaining()
    assert left is not None and 3 < left <= 5
    assert await lock.reacquire() is True
    left = await lock.lock.remaining()
    assert left is not None and 8 < left <= 10
    await lock.release()


async def test_extend_and_reacquire_refuse_what_redis_py_refuses(
    async_client: redis.asyncio.Redis,
) -> None:
    unheld = AsyncLock(async_client, "refuse", timeout=5)
    for call in (lambda: unheld.extend(1), unheld.reacquire):
        with pytest.raises(redis.exceptions.LockError, match="unlocked"):
            await call()
    renewed = AsyncLock(async_client, "renewed")
    assert await renewed.acquire()
    for call in (lambda: renewed.extend(1), renewed.reacquire):
        with pytest.raises(redis.exceptions.LockError, match="no timeout"):
            await call()
    await renewed.release()
    lost = AsyncLock(async_client, "refuse-lost", timeout=5)
    assert await lost.acquire()
    await async_client.flushall()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        await lost.extend(1)
    assert await lost.acquire(blocking=False)  # the handle is free again, as after release
    await async_client.flushall()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        await lost.reacquire()


# -- with -----------------------------------------------------------------------------------
async def test_with_raises_lock_error_when_not_acquired(
    async_client: redis.asyncio.Redis,
) -> None:
    holder = AsyncLock(async_client, "with")
    assert await holder.acquire()
    lock = AsyncLock(async_client, "with", blocking=False)
    with pytest.raises(NotAcquiredError) as caught:
        await AsyncTasks.run(lambda: _enter(lock))
    assert isinstance(caught.value, redis.exceptions.LockError)
    assert isinstance(caught.value, redlease.NotAcquired)
    await holder.release()


async def test_leaving_with_after_the_lock_was_lost(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    strict = AsyncLock(async_client, "exit", timeout=5)
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        async with strict:
            await async_client.flushall()
    lenient = AsyncLock(async_client, "exit", timeout=5, raise_on_release_error=False)
    with caplog.at_level(logging.WARNING, logger="redlease"):
        async with lenient:
            await async_client.flushall()
    assert "no longer owned" in caplog.text


# -- state, fence, outage -------------------------------------------------------------------
async def test_locked_owned_and_fence(async_client: redis.asyncio.Redis) -> None:
    first = AsyncLock(async_client, "state")
    second = AsyncLock(async_client, "state")
    assert not await first.locked() and not await first.owned()
    async with first:
        assert await first.locked() and await first.owned()
        assert await second.locked() and not await second.owned()
        fence = first.fence
    async with second:
        assert second.fence is not None and fence is not None and second.fence > fence
    assert first.fence is None


async def test_an_outage_is_a_connection_error_not_a_lock_error(make_server: object) -> None:
    srv = make_server()  # type: ignore[operator]
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    try:
        lock = AsyncLock(client, "outage")
        srv.stop()
        with pytest.raises(redis.exceptions.ConnectionError) as caught:
            await lock.acquire()
        assert isinstance(caught.value, UnavailableError)
        assert isinstance(caught.value, redlease.LockUnavailable)
        assert not isinstance(caught.value, redis.exceptions.LockError)
    finally:
        await redlease.asyncio.close(client)
        await client.aclose()


async def test_lock_class_on_a_cluster_client(cluster: RedisClusterServers) -> None:
    conn = cluster.async_client()
    try:
        lock = conn.lock("cluster-report", timeout=5, lock_class=AsyncLock)
        async with lock:
            assert await lock.owned()
            assert lock.fence is not None
        assert not await lock.locked()
    finally:
        await redlease.asyncio.close(conn)
        await conn.aclose()
