"""Lock and RLock against a real server (asyncio; tests/_sync/test_lock.py is generated)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, TimeoutError

import redlease._async.keeper as keeper_module
import redlease.asyncio as redlease
from redlease._async.keeper import TRUSTED
from redlease._async.runtime import runtime_for
from redlease._core.lease import Holding
from redlease._core.lock import LockKeys
from redlease.server import RedisServer
from tests._async.helpers import wait_until
from tests.support import (
    AsyncTasks,
    a_coroutine_function,
    a_plain_function,
    coroutine_callback,
)

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> LockKeys:
    return LockKeys.build("redlease", name.encode())


# -- the basics -----------------------------------------------------------------------------
async def test_acquire_release_and_state(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "orders:42", ttl=10.0)
    assert lock.fence is None
    assert await lock.remaining() is None
    assert not await lock.owned()
    assert not await lock.locked()

    assert await lock.acquire()
    assert lock.fence is not None and lock.fence > 0
    assert await lock.owned()
    assert await lock.locked()
    remaining = await lock.remaining()
    assert remaining is not None and 0 < remaining <= 10.0
    assert await async_client.get(keys("orders:42").lock) is not None

    await lock.release()
    assert lock.fence is None
    assert not await lock.locked()
    assert await async_client.exists(keys("orders:42").lock) == 0


async def test_inspect_is_one_typed_snapshot(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "snap", ttl=10.0)
    free = await lock.inspect()
    assert free == redlease.LockInfo(
        name="snap", held=False, mine=False, remaining=None, fence=0, waiters=0
    )
    assert await lock.acquire()
    other = redlease.Lock(async_client, "snap", ttl=10.0)
    held = await lock.inspect()
    seen = await AsyncTasks.run(other.inspect)
    assert held.held and held.mine and held.fence == lock.fence and held.waiters == 0
    assert held.remaining is not None and 0 < held.remaining <= 10.0
    assert seen.held and not seen.mine and seen.fence == lock.fence
    await lock.release()


@pytest.mark.parametrize(
    ("key", "write"),
    [
        ("lock", lambda c, k: c.hset(k, "f", "v")),
        ("fence", lambda c, k: c.set(k, "not a number")),
        ("queue", lambda c, k: c.set(k, "x")),
        ("handoff", lambda c, k: c.rpush(k, "x")),
    ],
)
async def test_inspect_names_a_key_holding_foreign_data(
    async_client: redis.asyncio.Redis, key: str, write: Any
) -> None:
    target = getattr(keys("alien"), key)
    await write(async_client, target)
    with pytest.raises(redlease.ForeignData, match=target.decode()) as caught:
        await redlease.Lock(async_client, "alien").inspect()
    assert caught.value.key == target


async def test_context_manager_and_not_acquired(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "ctx")
    async with holder as held:
        assert held.lock is holder and held.name == "ctx"
        assert held.fence == holder.fence  # held.fence is typed int, lock.fence int | None
        assert held.fence > 0
        other = redlease.Lock(async_client, "ctx", timeout=0.1)

        async def enter() -> None:
            async with other:
                raise AssertionError("entered a held lock")  # pragma: no cover

        with pytest.raises(redlease.NotAcquired, match="ctx"):
            await AsyncTasks.run(enter)
    assert not await holder.locked()


async def test_a_refused_with_says_how_long_it_waited(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "waited")
    assert await holder.acquire()
    sem = redlease.Semaphore(async_client, "waited-sem", 1)
    assert await sem.acquire()
    cases = [
        (
            redlease.Lock(async_client, "waited", timeout=0),
            r"held by another \(tried once: timeout 0\)",
        ),
        (redlease.Lock(async_client, "waited", timeout=0.05), r"for the whole timeout \(0.05 s\)"),
        (
            redlease.Semaphore(async_client, "waited-sem", 1, timeout=0),
            r"free \(tried once: timeout 0\)",
        ),
    ]
    for handle, message in cases:

        async def enter(handle: Any = handle) -> None:
            async with handle:
                raise AssertionError("entered")  # pragma: no cover

        with pytest.raises((redlease.NotAcquired, redlease.NoPermit), match=message):
            await AsyncTasks.run(enter)
    await holder.release()
    await sem.release()


async def test_non_blocking_and_zero_timeout_try_once(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "once")
    assert await holder.acquire()
    other = redlease.Lock(async_client, "once")
    assert await AsyncTasks.run(lambda: other.acquire(blocking=False)) is False
    assert await AsyncTasks.run(lambda: other.acquire(timeout=0)) is False
    assert await AsyncTasks.run(lambda: other.acquire(timeout=0.05)) is False
    # a try that gave up leaves nothing queued
    assert await async_client.zcard(keys("once").queue) == 0
    await holder.release()
    assert await other.acquire(blocking=False)
    await other.release()


async def test_release_twice_and_extend_unheld_raise_not_owned(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "twice")
    with pytest.raises(redlease.LockNotOwned, match="does not hold"):
        await lock.release()
    with pytest.raises(redlease.LockNotOwned, match="does not hold"):
        await lock.extend()
    await lock.acquire()
    await lock.release()
    with pytest.raises(redlease.LockNotOwned) as info:
        await lock.release()
    assert not isinstance(info.value, redlease.LockLost)


async def test_who_may_release_a_held_lock(async_client: redis.asyncio.Redis) -> None:
    """Threads: only the thread that acquired; another sees no fence and owned() False.
    asyncio: any task of the loop, as with ``asyncio.Lock`` (docs/safety.md)."""
    lock = redlease.Lock(async_client, "mine")
    await lock.acquire()
    fence = lock.fence
    assert fence is not None and await lock.owned()  # the acquirer sees it held

    async def seen() -> tuple[int | None, bool]:
        return lock.fence, await lock.owned()

    if AsyncTasks.ASYNC:
        assert await AsyncTasks.run(seen) == (fence, True)
        await AsyncTasks.run(lock.release)
        assert await async_client.exists(keys("mine").lock) == 0
        return
    assert await AsyncTasks.run(seen) == (None, False)
    with pytest.raises(redlease.LockNotOwned, match="held by another thread"):
        await AsyncTasks.run(lock.release)
    assert await lock.owned()
    await lock.release()


async def test_shared_handle_queues_locally_one_token_each(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "shared", ttl=5.0)
    seen: list[int] = []
    inside = 0

    async def worker() -> None:
        nonlocal inside
        for _ in range(10):
            async with lock:
                inside += 1
                assert inside == 1
                seen.append(lock.fence or 0)
                await AsyncTasks.sleep(0)
                inside -= 1

    await AsyncTasks.gather(worker, worker, worker)
    assert seen == sorted(seen) and len(set(seen)) == 30


async def test_the_holder_trying_again_is_contention_like_threading_lock(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "self")
    other = redlease.Lock(async_client, "self")
    await lock.acquire()
    # threading.Lock: a non-blocking or timed acquire by the holder is contention: False.
    for handle in (lock, other):
        assert await handle.acquire(blocking=False) is False
        assert await handle.acquire(timeout=0) is False
        assert await handle.acquire(timeout=0.1) is False
    assert await async_client.zcard(keys("self").queue) == 0  # nothing left queued
    # Only a wait that could never end raises: the holder renews its lease.
    for handle in (lock, other):
        with pytest.raises(RuntimeError, match=r"wait forever.*RLock"):
            await handle.acquire()
        with pytest.raises(RuntimeError, match="wait forever"):
            await handle.acquire(timeout=None)
    assert await lock.owned()
    await lock.release()
    assert await other.acquire(blocking=False)
    await other.release()


async def test_a_lease_that_ran_out_is_not_held_by_its_thread_any_more(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "lapsed", ttl=0.2, renew=False)
    assert await lock.acquire()
    first = lock.fence
    other = redlease.Lock(async_client, "lapsed", ttl=0.2, renew=False)
    # Not renewed: a wait without a timeout can end (when the lease does), so it waits.
    assert await other.acquire(timeout=None)
    await other.release()
    await AsyncTasks.sleep(0.3)
    assert await lock.acquire(blocking=False)  # the same handle, the same owner: free again
    assert lock.fence is not None and first is not None and lock.fence > first
    await lock.release()


async def test_extend_sets_the_remaining_lease(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "extend", ttl=2.0, renew=False)
    await lock.acquire()
    await lock.extend(30.0)
    remaining = await lock.remaining()
    assert remaining is not None and 2.0 < remaining <= 30.0
    await lock.extend(1.0)  # sets, does not add
    remaining = await lock.remaining()
    assert remaining is not None and remaining <= 1.0
    await lock.extend()
    remaining = await lock.remaining()
    assert remaining is not None and 1.0 < remaining <= 2.0
    await lock.release()


# -- reentrancy -----------------------------------------------------------------------------
async def test_rlock_reenters_and_releases_at_zero(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.RLock(async_client, "re")
    async with lock:
        fence = lock.fence
        async with lock:
            async with redlease.RLock(async_client, "re") as other:  # another object, same name
                assert other.fence == fence
            assert await lock.locked()
        assert await lock.owned()
    assert not await lock.locked()
    with pytest.raises(redlease.LockNotOwned):
        await lock.release()


async def test_rlock_excludes_other_owners(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.RLock(async_client, "re2")
    await lock.acquire()
    other = redlease.RLock(async_client, "re2")
    assert await AsyncTasks.run(lambda: other.acquire(timeout=0.05)) is False
    await lock.release()


async def test_rlock_reentry_after_loss_raises_lost(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.RLock(async_client, "re3", renew=False)
    await lock.acquire()
    await async_client.delete(keys("re3").lock)  # the lease "ran out"
    with pytest.raises(redlease.LockLost):
        await lock.acquire()
    with pytest.raises(redlease.LockLost):
        await lock.release()


# -- fencing --------------------------------------------------------------------------------
async def test_fence_increases_across_holders_and_expiry(async_client: redis.asyncio.Redis) -> None:
    fences = []
    for _ in range(3):
        async with redlease.Lock(async_client, "fence") as lock:
            fences.append(lock.fence)
    stale = redlease.Lock(async_client, "fence", ttl=0.1, renew=False)
    await stale.acquire()
    fences.append(stale.fence)
    assert await wait_until(lambda: _free(async_client, "fence"))
    async with redlease.Lock(async_client, "fence", timeout=5) as taker:
        fences.append(taker.fence)
    assert fences == sorted(fences) and len(set(fences)) == len(fences)
    with pytest.raises(redlease.LockLost, match="lost"):
        await stale.release()
    # no redlease operation resets the counter
    assert int(await async_client.get(keys("fence").fence)) == fences[-1]


async def _free(client: redis.asyncio.Redis, name: str) -> bool:
    return int(await client.exists(keys(name).lock)) == 0


async def test_fencing_rejects_a_stale_holder_and_its_twin_does_not(
    async_client: redis.asyncio.Redis,
) -> None:
    """A holder that pauses past its lease writes late: the fence catches it; no fence, no catch."""

    async def fenced_write(value: str, fence: int) -> bool:
        # The storage side of fencing: accept a write only with a fence >= the highest seen.
        script = (
            "local seen = tonumber(redis.call('GET', KEYS[2]) or '0') "
            "if tonumber(ARGV[2]) < seen then return 0 end "
            "redis.call('SET', KEYS[2], ARGV[2]) redis.call('SET', KEYS[1], ARGV[1]) return 1"
        )
        return bool(await async_client.eval(script, 2, "{data}", "{data}:fence", value, fence))

    paused = redlease.Lock(async_client, "store", ttl=0.1, renew=False)
    await paused.acquire()
    paused_fence = paused.fence or 0
    assert await wait_until(lambda: _free(async_client, "store"))  # the "pause" outlives the lease
    async with redlease.Lock(async_client, "store", timeout=5) as fresh:
        assert await fenced_write("fresh", fresh.fence or 0)
    assert not await fenced_write("stale", paused_fence)  # fencing rejects the late write
    assert await async_client.get("{data}") == b"fresh"
    await async_client.set("{data}", "stale")  # the twin: an unfenced late write corrupts
    assert await async_client.get("{data}") == b"stale"


# -- the watchdog ---------------------------------------------------------------------------
async def test_watchdog_keeps_a_lock_through_slow_work(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "slow", ttl=1.0)
    await lock.acquire()
    await AsyncTasks.sleep(5.0)  # five leases' worth of work
    assert await lock.owned()
    await lock.release()


async def test_without_watchdog_the_lease_runs_out(async_client: redis.asyncio.Redis) -> None:
    """The twin of the watchdog test: the same work without renewal loses the lock."""
    lost: list[bool] = []
    lock = redlease.Lock(
        async_client, "slow2", ttl=0.3, renew=False, on_lost=lambda: lost.append(1)
    )
    await lock.acquire()
    assert await wait_until(lambda: _free(async_client, "slow2"))
    assert not await lock.owned()
    assert await lock.remaining() == 0.0
    with pytest.raises(redlease.LockLost):
        await lock.release()
    assert lost == []  # no watchdog, nobody to notice early


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


async def test_a_lease_that_ran_out_before_acquire_returned_is_not_returned(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = redlease.Lock(async_client, "arrival", ttl=0.3)
    got, owned, again = await paused_after_the_grant(lock, monkeypatch, 0.5)
    assert got and owned and again  # taken again, with a live lease
    await lock.release()


async def test_twin_without_the_check_acquire_returns_a_lease_already_over(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above catches an acquire() that returns whatever it was granted."""
    monkeypatch.setattr(Holding, "ran_out", lambda self, now: False)
    lock = redlease.Lock(async_client, "arrival", ttl=0.3)
    got, owned, _ = await paused_after_the_grant(lock, monkeypatch, 0.5)
    assert got and not owned  # fails the check above: True, yet not held


async def test_watchdog_reports_a_lost_lock(async_client: redis.asyncio.Redis) -> None:
    lost: list[int] = []
    lock = redlease.Lock(async_client, "stolen", ttl=0.6, on_lost=lambda: lost.append(1))
    await lock.acquire()
    await async_client.set(keys("stolen").lock, b"someone-else", px=10_000)

    async def noticed() -> bool:
        return bool(lost)

    assert await wait_until(noticed)
    with pytest.raises(redlease.LockLost, match="lost before release"):
        await lock.release()
    assert await async_client.get(keys("stolen").lock) == b"someone-else"  # not deleted
    assert lost == [1]


async def test_on_lost_may_be_a_coroutine_function_in_asyncio_only(
    async_client: redis.asyncio.Redis,
) -> None:
    told: list[str] = []
    on_lost = coroutine_callback(told)

    if AsyncTasks.ASYNC:
        lock = redlease.Lock(async_client, "told", ttl=0.3, on_lost=on_lost)
        await lock.acquire()
        await async_client.delete(keys("told").lock)  # taken away: the next renewal sees it

        async def was_told() -> bool:
            return told == ["called"]

        assert await wait_until(was_told, limit=5)
        with pytest.raises(redlease.LockLost):
            await lock.release()
    else:
        with pytest.raises(TypeError, match="coroutine function"):
            redlease.Lock(async_client, "told", on_lost=on_lost)


async def test_one_renewer_serves_a_thousand_locks(async_client: redis.asyncio.Redis) -> None:
    locks = [redlease.Lock(async_client, f"many:{i}", ttl=2.0) for i in range(1000)]
    others = AsyncTasks.names().count("redlease-renewer")  # other clients', winding down
    for lock in locks:
        assert await lock.acquire(blocking=False)
    assert AsyncTasks.names().count("redlease-renewer") <= others + 1
    before = await _calls(async_client, "evalsha")
    await AsyncTasks.sleep(2.5)  # longer than the lease: held only if renewed (2 s of slack)
    renew_calls = await _calls(async_client, "evalsha") - before
    assert renew_calls < 1000  # batched: far fewer calls than locks
    pipe = async_client.pipeline()
    for lock in locks:
        pipe.pexpire(keys(str(lock.name)).lock, 10_000)  # 0 if gone (no XX: Redis 6.2)
    assert all(await pipe.execute())  # all still held
    for lock in locks:
        await lock.release()


async def _calls(client: redis.asyncio.Redis, command: str) -> int:
    stats = await client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_background_work_ends_with_the_locks(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "bg", ttl=3)
    waiter = redlease.Lock(async_client, "bg")

    async def wait_then_release() -> None:
        assert await wait_until(holder.locked)
        await waiter.acquire(timeout=10)
        await waiter.release()

    async def hold_a_while() -> None:
        await holder.acquire()
        await AsyncTasks.sleep(0.3)
        await holder.release()

    await AsyncTasks.gather(wait_then_release, hold_a_while)

    async def quiet() -> bool:
        names = AsyncTasks.names()
        return "redlease-renewer" not in names and "redlease-waiters" not in names

    assert await wait_until(quiet)


# -- waiting --------------------------------------------------------------------------------
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


async def test_waiters_are_served_in_queue_order(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "fifo")
    order: list[int] = []

    def waiter(i: int) -> Any:
        async def run() -> None:
            assert await wait_until(holder.locked)
            assert await wait_until(queued(async_client, "fifo", i))  # join in order i
            async with redlease.Lock(async_client, "fifo", timeout=20):
                order.append(i)

        return run

    await AsyncTasks.gather(
        hold_until(holder, queued(async_client, "fifo", 5)), *(waiter(i) for i in range(5))
    )
    assert order == [0, 1, 2, 3, 4]


async def test_a_dead_queue_head_is_skipped(async_client: redis.asyncio.Redis) -> None:
    """A waiter that died in the queue costs the others one hand-off window, not a hang."""
    holder = redlease.Lock(async_client, "dead", handoff=0.05)
    waiter = redlease.Lock(async_client, "dead", handoff=0.05)

    async def wait() -> bool:
        assert await wait_until(holder.locked)
        await async_client.zadd(keys("dead").queue, {b"crashed-waiter": 0})
        acquired = await waiter.acquire(timeout=10)
        await waiter.release()
        return acquired

    results = await AsyncTasks.gather(wait, hold_until(holder, queued(async_client, "dead", 2)))
    assert results[0] is True
    assert await async_client.zcard(keys("dead").queue) == 0


async def test_a_waiter_gets_the_lock_when_the_lease_ends_without_release(
    async_client: redis.asyncio.Redis,
) -> None:
    crashed = redlease.Lock(async_client, "crash", ttl=0.3, renew=False)
    await crashed.acquire()  # and never released: as if its process died
    waiter = redlease.Lock(async_client, "crash")

    async def wait() -> int:
        assert await waiter.acquire(timeout=10)
        fence = waiter.fence or 0
        await waiter.release()
        return fence

    assert await AsyncTasks.run(wait) > (crashed.fence or 0)


@pytest.mark.parametrize("linger", [1.0, 0.0])
async def test_a_crowd_of_waiters_loses_no_wake_up(
    async_client: redis.asyncio.Redis, linger: float
) -> None:
    """Eight handles on one lock, all waiting at once from a process that never waited before.

    With a 30 s lease and a 20 s timeout, one lost wake-up fails the test: the waiter would
    sleep until the lease runs out. ``linger=0`` makes the hub stop listening as soon as it
    has no waiter, the race in which a turn used to go unheard.
    """
    runtime_for(async_client).hub._linger = linger
    done: list[int] = []

    def worker(i: int) -> Any:
        async def run() -> None:
            lock = redlease.Lock(async_client, "crowd", ttl=30.0)
            for _ in range(5):
                assert await lock.acquire(timeout=20)
                await lock.release()
            done.append(i)

        return run

    await AsyncTasks.gather(*(worker(i) for i in range(8)))
    assert sorted(done) == list(range(8))


async def test_a_blocked_waiter_sends_no_commands(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "idle", ttl=10)
    await holder.acquire()
    waiter = redlease.Lock(async_client, "idle")
    counted: list[int] = []

    async def wait() -> bool:
        return await waiter.acquire(timeout=1.5)

    async def count() -> None:
        await AsyncTasks.sleep(0.4)  # the waiter is queued and asleep by now
        before = await _processed(async_client)
        await AsyncTasks.sleep(1.0)
        counted.append(await _processed(async_client) - before - 1)  # minus our INFO

    results = await AsyncTasks.gather(wait, count)
    assert results[0] is False
    assert counted == [0]
    await holder.release()


async def _processed(client: redis.asyncio.Redis) -> int:
    return int((await client.info("stats"))["total_commands_processed"])


# -- bad input ------------------------------------------------------------------------------
BAD_TTLS = [
    (0, ValueError, "ttl must be > 0"),
    (-1, ValueError, "ttl must be > 0"),
    (math.nan, ValueError, "ttl must be a number of seconds, got NaN"),
    (math.inf, ValueError, "ttl must be at most 30 days"),
    (31 * 24 * 3600, ValueError, "ttl must be at most 30 days"),
    ("10", TypeError, "ttl must be a number of seconds, got str"),
    (True, TypeError, "ttl must be a number of seconds, got bool"),
    (None, TypeError, "ttl must be a number of seconds, got NoneType"),
    (0.0001, ValueError, "ttl must be at least 0.05 seconds"),
    (0.049, ValueError, "ttl must be at least 0.05 seconds"),
]


@pytest.mark.parametrize(("ttl", "error", "message"), BAD_TTLS)
async def test_bad_ttl(
    async_client: redis.asyncio.Redis, ttl: Any, error: Any, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Lock(async_client, "x", ttl=ttl)
    lock = redlease.Lock(async_client, "x")
    if ttl is not None:
        await lock.acquire()
        with pytest.raises(error, match=message):
            await lock.extend(ttl)
        await lock.release()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"timeout": -2}, ValueError, "timeout must be >= 0 seconds, or None / -1"),
        ({"timeout": math.nan}, ValueError, "timeout must be a number of seconds, got NaN"),
        ({"timeout": "1"}, TypeError, "timeout must be a number of seconds, got str"),
        ({"prefix": "my app"}, ValueError, "prefix must not contain white space or braces"),
        ({"prefix": "a{b}"}, ValueError, "prefix must not contain white space or braces"),
        ({"prefix": ""}, ValueError, "prefix must not be empty"),
        ({"prefix": b"x"}, TypeError, "prefix must be str, got bytes"),
        ({"renew": 1}, TypeError, "renew must be a bool"),
        ({"on_lost": 3}, TypeError, "on_lost must be callable"),
        ({"on_lost": lambda why: None}, TypeError, "on_lost must be callable with no arguments"),
        ({"ttl": 0.01}, ValueError, "ttl must be at least 0.05 seconds"),
        ({"handoff": 0}, ValueError, "handoff must be > 0"),
    ],
)
async def test_bad_options(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: Any, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Lock(async_client, "x", **kwargs)


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("", ValueError, "name must not be empty"),
        (b"", ValueError, "name must not be empty"),
        (42, TypeError, "name must be str or bytes, got int"),
        (None, TypeError, "name must be str or bytes, got NoneType"),
    ],
)
async def test_bad_name(
    async_client: redis.asyncio.Redis, name: Any, error: Any, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Lock(async_client, name)


async def test_bad_acquire_arguments(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "args")
    with pytest.raises(ValueError, match="timeout must not be given when blocking is False"):
        await lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        await lock.acquire(timeout=-5)
    assert await lock.acquire(timeout=-1)  # -1 is "forever", as in threading
    await lock.release()


async def test_client_of_the_wrong_kind_is_refused() -> None:
    wrong = AsyncTasks.WRONG_CLIENT()
    with pytest.raises(
        TypeError,
        match=r"must be a redis.*sync clients go with redlease, asyncio clients with "
        r"redlease\.asyncio\)",
    ):
        redlease.Lock(wrong, "x")
    with pytest.raises(TypeError, match="client must be a redis"):
        redlease.Lock("redis://localhost", "x")  # type: ignore[arg-type]


async def test_bytes_names_work(async_client: redis.asyncio.Redis) -> None:
    async with redlease.Lock(async_client, b"\xffraw") as lock:
        assert lock.fence is not None and lock.fence > 0
        assert await async_client.exists(b"redlease:{\xffraw}:lock") == 1


# -- outages --------------------------------------------------------------------------------
async def test_outage_raises_unavailable_not_false(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    lock = redlease.Lock(client, "down", timeout=None)  # waiting forever is for contention
    srv.stop()
    with pytest.raises(redlease.LockUnavailable, match="could not acquire lock 'down'") as info:
        await lock.acquire()
    assert isinstance(info.value.__cause__, (ConnectionError, TimeoutError, OSError))
    await client.aclose()


async def test_release_during_outage_raises_and_lets_go(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    lock = redlease.Lock(client, "down2", ttl=2.0)
    await lock.acquire()
    srv.stop()
    with pytest.raises(redlease.LockUnavailable) as info:
        await lock.release()
    assert info.value.__cause__ is not None
    assert lock.fence is None  # the handle let go; the lease runs out on its own
    await client.aclose()


async def test_hung_server_raises_unavailable_and_leaves_no_lock(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.3)
    lock = redlease.Lock(client, "hang", ttl=1.0)
    srv.pause()
    try:
        with pytest.raises(redlease.LockUnavailable) as info:
            await lock.acquire()
        assert isinstance(info.value.__cause__, (TimeoutError, ConnectionError))
    finally:
        srv.resume()
    check = redis.asyncio.Redis(host=srv.host, port=srv.port)
    assert await wait_until(lambda: _free(check, "hang"), limit=5.0)  # at most the lease
    await check.aclose()
    await client.aclose()


# -- every call is bounded: its timeout plus at most one socket timeout (issue 8) -----------
SLACK = 1.5  # seconds of scheduling noise allowed on a loaded machine


async def test_a_hung_server_costs_the_timeout_plus_one_socket_timeout(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=3.0)
    srv.pause()  # hung before the first call: the connection's handshake hangs too
    try:
        started = time.monotonic()
        with pytest.raises(redlease.LockUnavailable):
            await redlease.Lock(client, "bounded", timeout=0.2).acquire()
        # The failed acquire's clean-up gets what is left of the bound, not a socket timeout
        # of its own (that took 2 x 3 s).
        assert time.monotonic() - started < 0.2 + 3.0 + SLACK
    finally:
        srv.resume()
    await client.aclose()


async def test_a_waiter_whose_timeout_ends_in_an_outage_is_told_unavailable_not_false(
    make_server: Any,
) -> None:
    srv = make_server()
    holder_client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    holder = redlease.Lock(holder_client, "outage", ttl=30.0)
    await holder.acquire()
    waiter = redlease.Lock(client, "outage")
    assert await waiter.acquire(timeout=0.3) is False  # contention: False (and warm)

    async def hang_soon() -> None:
        await AsyncTasks.sleep(0.3)
        srv.pause()

    started = time.monotonic()
    try:
        with pytest.raises(redlease.LockUnavailable, match="leave the queue"):
            await AsyncTasks.gather(lambda: waiter.acquire(timeout=1.0), hang_soon)
        assert time.monotonic() - started < 1.0 + 1.0 + SLACK
    finally:
        srv.resume()
    await holder.release()
    await client.aclose()
    await holder_client.aclose()


async def test_release_extend_and_inspect_on_a_hung_server_take_one_socket_timeout(
    make_server: Any,
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    lock = redlease.Lock(client, "stuck", ttl=30.0, renew=False)
    await lock.acquire()
    srv.pause()
    try:
        for call in (lock.inspect, lock.extend, lock.release):
            started = time.monotonic()
            with pytest.raises(redlease.LockUnavailable):
                await call()
            assert time.monotonic() - started < 1.0 + SLACK
    finally:
        srv.resume()
    await client.aclose()


async def test_server_restarting_empty_is_reported_lost(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    lost: list[int] = []
    lock = redlease.Lock(client, "amnesia", ttl=0.6, on_lost=lambda: lost.append(1))
    await lock.acquire()
    srv.restart(empty=True)

    async def noticed() -> bool:
        return bool(lost)

    assert await wait_until(noticed)
    with pytest.raises(redlease.LockLost):
        await lock.release()
    await client.aclose()


async def test_a_client_that_decodes_responses_works(server: RedisServer) -> None:
    """Many applications set decode_responses=True: replies and messages arrive as str."""
    client = redis.asyncio.Redis(host=server.host, port=server.port, decode_responses=True)
    seen: list[int] = []

    def worker(i: int) -> Any:
        async def run() -> None:
            lock = redlease.Lock(client, "decoded", ttl=5.0)
            for _ in range(10):
                async with lock:
                    seen.append(lock.fence or 0)
            assert await lock.remaining() is None

        return run

    await AsyncTasks.gather(*(worker(i) for i in range(3)))  # contended: hub messages too
    assert sorted(seen) == seen and len(set(seen)) == 30
    await client.aclose()


async def test_connections_the_server_closed_while_idle_are_replaced(
    async_client: redis.asyncio.Redis,
) -> None:
    """redlease keeps its connections between calls; one the server closed meanwhile (its
    `timeout`, a restart, CLIENT KILL) is found closed before use and replaced: the next call
    works, where reusing it would have raised LockUnavailable."""
    lock = redlease.Lock(async_client, "kept-connections", renew=False)
    for _ in range(3):
        assert await lock.acquire()
        await lock.release()
    kept = runtime_for(async_client).backend.keeper.kept
    assert kept  # the twin of the check below: there are kept connections to kill
    killed = 0
    for conn, _ in kept:
        killed += await async_client.client_kill_filter(_id=str(await conn_id(conn)))
    assert killed == len(kept)
    await AsyncTasks.sleep(2 * TRUSTED)  # idle longer than a connection is trusted unchecked
    assert await lock.acquire()  # on a fresh connection, not a LockUnavailable
    await lock.release()


async def test_twin_a_killed_connection_reused_unchecked_fails_the_call(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: trusted unchecked (as within TRUSTED of its last reply), a connection the
    server closed fails the call that reuses it."""
    monkeypatch.setattr(keeper_module, "TRUSTED", 1e9)
    lock = redlease.Lock(async_client, "kept-connections-twin", renew=False)
    assert await lock.acquire()
    await lock.release()
    kept = runtime_for(async_client).backend.keeper.kept
    for conn, _ in kept:
        await async_client.client_kill_filter(_id=str(await conn_id(conn)))
    with pytest.raises(redlease.LockUnavailable):
        await lock.acquire()


async def conn_id(conn: Any) -> int:
    """The server's id of one of redlease's connections."""
    await conn.send_command("CLIENT", "ID")
    return int(await conn.read_response())


def _count(client: Any, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


async def renewal_calls_per_round(server: RedisServer, n: int) -> float:
    """Hold ``n`` locks through one client; renewal calls per round (each lock renewed once)."""
    probe = server.client()
    probe.flushall()
    client = redis.asyncio.Redis(host=server.host, port=server.port)
    locks = [redlease.Lock(client, f"many:{i}", ttl=1.5) for i in range(n)]
    try:
        for lock in locks:
            assert await lock.acquire()
        await AsyncTasks.sleep(1.0)  # a first round or two: the renewals fall into step
        probe.config_resetstat()
        await AsyncTasks.sleep(2.0)  # about four rounds (one every ttl / 3), slack for load
        calls, renewed = _count(probe, "evalsha"), _count(probe, "pexpire")
        assert renewed >= 2 * n  # every lock renewed, tick after tick
        for lock in locks:
            await lock.release()
    finally:
        await redlease.close(client)
        await client.aclose()
        probe.close()
    return calls / (renewed / n)


async def test_the_watchdog_renews_thousands_of_locks_in_a_few_calls_a_round(
    server: RedisServer,
) -> None:
    # 1,500 holdings: two calls of at most renewals.CHUNK (1,000), sent before any reply,
    # in about two ticks a round (coalesce=0.5).
    assert await renewal_calls_per_round(server, 1500) <= 8


async def test_twin_renewing_in_calls_of_100_would_take_15_a_round(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: with calls of 100 holdings (the old batch), it is 15 or more a round."""
    monkeypatch.setattr("redlease._core.renewals.CHUNK", 100)
    assert await renewal_calls_per_round(server, 1500) > 8


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
