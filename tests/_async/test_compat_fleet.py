"""redlease.compat beyond the one-line switch: ``lock_class=functools.partial(...)`` for
redlease's own options, and ``keys="redis-py"``, the mixed-fleet mode in which redis-py's
``Lock`` and ``redlease.compat``'s exclude each other during a rolling migration (asyncio;
tests/_sync/test_compat_fleet.py is generated). Rows of docs/moving-from-redis-py.md."""

from __future__ import annotations

import functools

import pytest
import redis.asyncio
import redis.asyncio.lock

import redlease
import redlease.asyncio
from redlease.compat import AsyncLock, LockNotOwnedError
from tests.support import AsyncTasks
from tests.topology import RedisClusterServers

pytestmark = pytest.mark.timeout(60)


# -- lock_class with redlease's options -----------------------------------------------------
async def test_lock_class_partial_passes_lease_and_prefix(
    async_client: redis.asyncio.Redis,
) -> None:
    with_options = functools.partial(AsyncLock, lease=3, prefix="app")
    lock = async_client.lock("report", blocking_timeout=1, lock_class=with_options)
    assert isinstance(lock, AsyncLock)
    assert lock.lock.ttl == 3 and lock.blocking_timeout == 1
    async with lock:
        assert await async_client.exists("app:{report}:lock")
        assert 2 < await async_client.pttl("app:{report}:lock") / 1000 <= 3


async def test_twin_redis_lock_passes_no_extra_keyword_to_lock_class(
    async_client: redis.asyncio.Redis,
) -> None:
    """Why the partial: redis-py's ``Redis.lock`` has no ``**kwargs`` to pass on."""
    with pytest.raises(TypeError, match="lease"):
        async_client.lock("report", lock_class=AsyncLock, lease=3)  # type: ignore[call-arg]


# -- keys="redis-py": the mixed fleet ------------------------------------------------------
def mixed(client: redis.asyncio.Redis, name: str, **options: object) -> AsyncLock:
    return AsyncLock(client, name, keys="redis-py", **options)  # type: ignore[arg-type]


async def test_a_redis_py_lock_excludes_a_mixed_mode_lock(
    async_client: redis.asyncio.Redis,
) -> None:
    theirs = redis.asyncio.lock.Lock(async_client, "job", timeout=10)
    ours = mixed(async_client, "job", timeout=10)
    assert await theirs.acquire(blocking=False)
    assert await ours.acquire(blocking=False) is False
    assert await ours.locked()
    await theirs.release()
    assert await ours.acquire(blocking=False)
    await ours.release()


async def test_a_mixed_mode_lock_excludes_a_redis_py_lock_and_keeps_its_key(
    async_client: redis.asyncio.Redis,
) -> None:
    ours = mixed(async_client, "job", timeout=10)
    theirs = redis.asyncio.lock.Lock(async_client, "job", timeout=10)
    async with ours:
        assert await theirs.acquire(blocking=False) is False
        assert await theirs.locked()
        assert await async_client.exists("job") == 1
        assert 9 <= await async_client.ttl("job") <= 10
        assert await async_client.keys("*") == [b"job"]  # redis-py's keyspace, nothing else
    assert await async_client.exists("job") == 0
    assert await theirs.acquire(blocking=False)
    await theirs.release()


async def test_twin_the_default_keys_do_not_exclude_redis_pys_lock(
    async_client: redis.asyncio.Redis,
) -> None:
    """The check above catches a lock in redlease's own keys: both hold at once."""
    ours = AsyncLock(async_client, "job", timeout=10)
    theirs = redis.asyncio.lock.Lock(async_client, "job", timeout=10)
    async with ours:
        assert await theirs.acquire(blocking=False)  # both "hold" the lock
        assert await async_client.exists("redlease:{job}:lock") == 1
        await theirs.release()
        assert await async_client.exists("job") == 0  # r.exists(name) says "free"


async def test_a_mixed_mode_waiter_gets_the_lock_a_redis_py_holder_releases(
    async_client: redis.asyncio.Redis,
) -> None:
    theirs = redis.asyncio.lock.Lock(async_client, "wait", timeout=10, thread_local=False)
    ours = mixed(async_client, "wait", timeout=10, sleep=0.02, blocking_timeout=10)
    assert await theirs.acquire()

    async def release_soon() -> None:
        await AsyncTasks.sleep(0.2)
        await theirs.release()

    releasing = AsyncTasks.spawn(release_soon)
    assert await ours.acquire() and await ours.owned()
    assert await AsyncTasks.outcome(releasing) is None
    assert await ours.acquire(blocking=False) is False  # (held: by this very task)
    await ours.release()
    short = mixed(async_client, "wait", blocking_timeout=0.2)
    assert await theirs.acquire()
    assert await short.acquire() is False  # polled until its blocking_timeout


async def test_mixed_mode_timeout_none_is_a_renewed_lease(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = mixed(async_client, "renewed", lease=1)
    async with lock:
        await AsyncTasks.sleep(1.6)  # longer than the lease: the watchdog renews the key
        assert await lock.owned()
        assert 0 < await async_client.pttl("renewed") <= 1000
    assert await async_client.exists("renewed") == 0


async def test_mixed_mode_extend_release_and_fence(async_client: redis.asyncio.Redis) -> None:
    lock = mixed(async_client, "extend", timeout=5)
    async with lock:
        first = lock.fence
        assert first is not None and first > 0
        await lock.extend(5)
        assert 9 < await async_client.pttl("extend") / 1000 <= 10
        await lock.extend(2, replace_ttl=True)
        assert await async_client.pttl("extend") <= 2000
    assert await lock.acquire()
    assert lock.fence is not None and lock.fence > first  # the server's clock: later, larger
    await async_client.delete("extend")  # e.g. an operator, or a redis-py force release
    with pytest.raises(LockNotOwnedError):
        await lock.release()


async def test_bad_keys_and_a_prefix_with_redis_py_keys_are_refused(
    async_client: redis.asyncio.Redis,
) -> None:
    with pytest.raises(ValueError, match=r"^keys must be 'redlease' or 'redis-py'"):
        AsyncLock(async_client, "x", keys="redis_py")
    with pytest.raises(TypeError, match=r"^keys must be"):
        AsyncLock(async_client, "x", keys=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prefix applies to keys='redlease' only"):
        AsyncLock(async_client, "x", keys="redis-py", prefix="app")


async def test_mixed_mode_on_a_cluster_client(cluster: RedisClusterServers) -> None:
    conn = cluster.async_client()
    try:
        ours = conn.lock("{user:1}:job", lock_class=functools.partial(AsyncLock, keys="redis-py"))
        theirs = conn.lock("{user:1}:job", timeout=5)
        async with ours:
            assert await theirs.acquire(blocking=False) is False
            assert await conn.exists("{user:1}:job") == 1
        assert await theirs.acquire(blocking=False)
        assert await ours.acquire(blocking=False) is False
        await theirs.release()
    finally:
        await redlease.asyncio.close(conn)
        await conn.aclose()
