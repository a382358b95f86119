"""Lock(fair=False) against a real server: nobody starves behind a process that keeps re-taking
the lock (asyncio; tests/_sync/test_lock_barging.py is generated).

The process that keeps re-taking it is played by a looper that releases and re-acquires in one
MULTI transaction with the lock's own scripts: nobody can ever take the free lock in between,
so without the head grant the waiter would wait for ever (the twins show it does).
"""

from __future__ import annotations

import time

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.lock import ACQUIRE_BARGING, BARGE_MS, RELEASE, ROTATION_MS, LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)

LEASE, WINDOW, CHANNELS = 10_000, 250, b"redlease:waiters:"
NEVER = 10**9  # ms: a turn that never ends (the head grant off)


class Looper:
    """A holder that releases and re-takes the lock atomically, every ``pause`` seconds, until
    a release grants the lock to a waiter (its own re-take is then refused) or ``limit``."""

    def __init__(self, client: redis.asyncio.Redis, name: str) -> None:
        self.client = client
        self.keys = LockKeys.build("redlease", name.encode())
        self.token = b"looper.0"
        self.lost_after: float | None = None  # seconds from start until a waiter got it

    async def take(self) -> None:
        k = self.keys
        args = [self.token, LEASE, 0, WINDOW, CHANNELS]
        reply = await self.client.eval(
            ACQUIRE_BARGING.source, 4, k.lock, k.fence, k.queue, k.handoff, *args
        )
        assert int(reply[0]) == 1

    async def loop(self, barges: list[int], limit: float, pause: float = 0.002) -> None:
        """Release with ``barges[i]`` as the barge ms of the i-th release (the last one from
        then on), re-taking at once, until refused or ``limit`` seconds."""
        k = self.keys
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < limit:
            await AsyncTasks.sleep(pause)
            barge = barges[min(i, len(barges) - 1)]
            nxt = b"looper.%d" % (i + 1)
            pipe = self.client.pipeline(transaction=True)
            rotation = 0 if barge == NEVER else ROTATION_MS  # (NEVER: no shorter turn either)
            release = [self.token, WINDOW, CHANNELS, b"B", barge, b"1", rotation]
            pipe.eval(RELEASE.source, 4, k.lock, k.fence, k.queue, k.handoff, *release)
            acquire = [nxt, LEASE, 0, WINDOW, CHANNELS]
            pipe.eval(ACQUIRE_BARGING.source, 4, k.lock, k.fence, k.queue, k.handoff, *acquire)
            released, taken = await pipe.execute()
            assert int(released) == 1
            i += 1
            if int(taken[0]) != 1:
                self.lost_after = time.monotonic() - start
                return
            self.token = nxt


async def queued(client: redis.asyncio.Redis, looper: Looper, n: int) -> bool:
    return int(await client.zcard(looper.keys.queue)) == n


async def run_head_grant(client: redis.asyncio.Redis, barge: int) -> tuple[bool, Looper]:
    looper = Looper(client, "barging")
    await looper.take()
    lock = redlease.Lock(client, "barging", ttl=10.0, fair=False)

    async def wait() -> bool:
        got = await lock.acquire(timeout=1.5)
        if got:
            await lock.release()
        return got

    async def loop() -> None:
        assert await wait_until(lambda: queued(client, looper, 1))
        await looper.loop([barge], limit=2.0)

    got, _ = await AsyncTasks.gather(wait, loop)
    return got, looper


async def test_a_waiter_is_granted_the_lock_from_a_holder_that_keeps_re_taking_it(
    async_client: redis.asyncio.Redis,
) -> None:
    """The head waits its turn (at most BARGE_MS at the head), then the next release grants
    it the lock: the looper's own re-take is refused. The bound asserted is generous (a loaded
    machine); the fallback it must beat is the looper's 10 s lease."""
    got, looper = await run_head_grant(async_client, BARGE_MS)
    assert got
    assert looper.lost_after is not None and looper.lost_after < 1.5


async def test_twin_without_the_head_grant_the_waiter_starves(
    async_client: redis.asyncio.Redis,
) -> None:
    """The twin: with a turn that never ends, the waiter is woken (F), loses every race to the
    looper, and is still waiting when its 1.5 s timeout ends; the looper never lost the lock."""
    got, looper = await run_head_grant(async_client, NEVER)
    assert not got
    assert looper.lost_after is None
