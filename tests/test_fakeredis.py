"""What docs/compatibility.md says a user's unit tests can and cannot rely on under fakeredis.

fakeredis is here only to check that claim: every other test runs on real servers. Each
"can rely on" line of the page has its check below, and so has each "cannot".
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import redlease
import redlease.asyncio

fakeredis = pytest.importorskip("fakeredis", reason="fakeredis[lua] is in the test extra")
pytest.importorskip("lupa", reason="fakeredis runs Lua scripts with lupa (fakeredis[lua])")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fake() -> Iterator[Any]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield client
    redlease.close(client)
    client.close()


def test_locks_fences_waiting_and_expiry(fake: Any) -> None:
    with redlease.Lock(fake, "a", ttl=5, timeout=1) as held:
        assert held.fence > 0
    rlock = redlease.RLock(fake, "r")
    with rlock, rlock:
        assert rlock.owned()

    first = redlease.Lock(fake, "w", ttl=30)
    assert first.acquire()
    got: list[bool] = []
    waiter = threading.Thread(
        target=lambda: got.append(redlease.Lock(fake, "w", timeout=10).acquire())
    )
    waiter.start()
    time.sleep(0.2)
    first.release()  # the waiter is woken by pub/sub, long before its 10 s
    waiter.join(10)
    assert got == [True]

    short = redlease.Lock(fake, "e", ttl=0.1, renew=False)
    assert short.acquire()
    short.extend(0.2)
    time.sleep(0.4)  # the lease runs out by the (fake) server's clock
    assert redlease.Lock(fake, "e").acquire(blocking=False)


def test_the_other_primitives(fake: Any) -> None:
    inventory = redlease.Inventory(fake, "sku")
    inventory.restock(1)
    inventory.reserve(user="u", order_id="o1")
    inventory.confirm("o1")
    with pytest.raises(redlease.SoldOut):
        inventory.reserve(user="v", order_id="o2")
    for algorithm in ("fixed", "gcra"):
        limiter = redlease.RateLimiter(fake, algorithm, limit=2, algorithm=algorithm)
        assert [limiter.hit("k").allowed for _ in range(3)] == [True, True, False]
    store = redlease.FencedStore(fake, "fs")
    store.write(3, "x")
    with pytest.raises(redlease.StaleFence):
        store.write(2, "y")
    semaphore = redlease.Semaphore(fake, "s", 2, renew=False)
    assert [semaphore.acquire(blocking=False) for _ in range(3)] == [True, True, False]
    latch = redlease.CountDownLatch(fake, "l")
    latch.try_set_count(1)
    threading.Timer(0.1, latch.count_down).start()
    assert latch.wait(5)
    rw = redlease.ReadWriteLock(fake, "rw", renew=False)
    assert rw.read.acquire()
    writing: list[bool] = []
    other = redlease.ReadWriteLock(fake, "rw", renew=False)
    writer = threading.Thread(target=lambda: writing.append(other.write.acquire(blocking=False)))
    writer.start()
    writer.join(10)
    assert writing == [False]  # a reader holds it
    rw.read.release()
    election = redlease.Election(fake, "e", renew=False)
    assert election.campaign("me")
    leader = election.leader()
    assert leader is not None and leader.value == "me" and leader.term == election.term
    election.resign()


def test_asyncio(fake: Any) -> None:
    async def main() -> int | None:
        client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
        try:
            async with redlease.asyncio.Lock(client, "a", ttl=5) as held:
                return held.fence
        finally:
            await redlease.asyncio.close(client)
            await client.aclose()

    fence = asyncio.run(main())
    assert fence is not None and fence > 0


def test_cannot_renew_a_lease(fake: Any) -> None:
    """The watchdog's renewals set socket timeouts, which fakeredis's socket lacks: a held
    lock is lost after its ttl (hence ``renew=False`` and a ttl longer than the test)."""
    lock = redlease.Lock(fake, "renewed", ttl=0.3)
    assert lock.acquire()
    time.sleep(1.0)
    with pytest.raises(redlease.LockLost):
        lock.release()


def test_cannot_run_a_redlock() -> None:
    clients = [fakeredis.FakeRedis(server=fakeredis.FakeServer()) for _ in range(3)]
    with pytest.raises(redlease.QuorumUnavailable, match="settimeout"):
        redlease.Redlock(clients, "r").acquire(blocking=False)
    for client in clients:
        redlease.close(client)
