"""asyncio: the hub's reader (the leading task) sends a grant's claim and reads its reply
before it wakes the waiter, so ``acquire()`` returns a lock held on its own lease.

A task granted the lock on the short lease of the hand-off window that then holds it past the
window without touching it is held on its full lease (the twin: were the claim's reply not
applied, the handle would judge the lock on the grant's short lease, long run out, while
Redis holds it).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async import lock_claim

pytestmark = pytest.mark.timeout(60)
HANDOFF = 0.2


async def _granted_after_waiting(
    client: redis.asyncio.Redis, name: str, hold: float
) -> dict[str, Any]:
    """Another client holds ``name``; a task on ``client`` waits, is granted the lock by the
    release, and holds it ``hold`` seconds. What the waiting task saw."""
    holder_client = redis.asyncio.Redis(connection_pool=client.connection_pool)
    holder = redlease.Lock(holder_client, name, ttl=30)
    assert await holder.acquire()
    waiter = redlease.Lock(client, name, ttl=30, handoff=HANDOFF)
    seen: dict[str, Any] = {}

    async def wait() -> None:
        seen["acquired"] = await waiter.acquire(timeout=20)
        await asyncio.sleep(hold)
        holding = waiter._held()
        seen["believed"] = None if holding is None else holding.expires_at - time.monotonic()
        seen["owned"] = await waiter.owned()
        seen["remaining"] = await waiter.remaining()
        seen["pttl"] = await client.pttl(f"redlease:{{{name}}}:lock")
        try:
            await waiter.release()
            seen["released"] = True
        except redlease.LockError as exc:
            seen["released"] = exc

    task = asyncio.create_task(wait())
    probe = redis.asyncio.Redis(connection_pool=client.connection_pool)
    for _ in range(500):  # queued
        if await probe.zcard(f"redlease:{{{name}}}:queue"):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(HANDOFF + 0.1)  # queued longer than the window: a short-lease grant
    await holder.release()
    await asyncio.wait_for(task, 30)
    await redlease.close(holder_client)
    return seen


async def test_a_grant_held_past_the_handoff_window_is_held_on_its_full_lease(
    async_client: redis.asyncio.Redis,
) -> None:
    seen = await _granted_after_waiting(async_client, "settled-async", hold=5 * HANDOFF)
    assert seen["acquired"] and seen["owned"]
    assert seen["remaining"] > 20  # the 30 s lease, not what is left of the grant's 0.2 s
    assert seen["pttl"] > 20_000
    assert seen["believed"] > 20  # the handle knows it: it read the claim's reply
    assert seen["released"] is True


async def test_twin_a_grant_whose_claim_is_not_applied_is_judged_on_its_short_lease(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lock_claim.AsyncGrantee.settle

    def settle_unapplied(self: Any, hub: Any, waiter: Any, result: Any, ok: Any, sent: Any) -> None:
        real(self, hub, waiter, result, ok, None if ok is True else sent)

    monkeypatch.setattr(lock_claim.AsyncGrantee, "settle", settle_unapplied)
    seen = await _granted_after_waiting(async_client, "unsettled-async", hold=5 * HANDOFF)
    assert seen["acquired"]
    assert seen["pttl"] > 20_000  # the claim landed: Redis holds it for the lease
    assert seen["owned"]  # Redis says so too
    # but the handle still judges it on the grant's 0.2 s, which ran out long ago
    assert seen["believed"] is not None and seen["believed"] < 0


async def test_a_granted_lock_is_released_at_once_after_close(server: Any) -> None:
    """A granted lock (its claim read) released after redlease is closed: the release goes on a
    fresh connection at once (it used to be sent behind the claim on a connection close()
    ended, and waited a socket timeout for a reply that never came, then raised)."""
    client = redis.asyncio.Redis(host=server.host, port=server.port, socket_timeout=3.0)
    holder_client = redis.asyncio.Redis(host=server.host, port=server.port)
    holder = redlease.Lock(holder_client, "closed-grant", ttl=30)
    waiter = redlease.Lock(client, "closed-grant", ttl=10)  # another ttl: the grant is claimed
    assert await holder.acquire()
    task = asyncio.ensure_future(waiter.acquire(timeout=10))
    await asyncio.sleep(0.2)
    await holder.release()
    assert await task
    await redlease.close(client)
    started = time.monotonic()
    await waiter.release()
    assert time.monotonic() - started < 1.5  # not a socket timeout (3 s)
    assert not await holder_client.exists(b"redlease:{closed-grant}:lock")
    for each in (client, holder_client):
        await redlease.close(each)
        await each.aclose()
