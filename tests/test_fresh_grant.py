"""A waiter granted the lock less than the hand-off window after it joined the queue is granted
the releaser's lease (lock_lib.lua's grant_lock): with the same ``ttl``, it holds the lock on
its own lease at once and claims nothing; with another ``ttl``, it claims its own.

* the same ttl: the handle believes the full lease, never longer than the server holds it;
* a longer ttl than the releaser's: the claim still lands, and the server holds the lock for
  the grantee's own lease (the twin: a grantee that skips every fresh claim is left with the
  releaser's shorter lease, which the check catches).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease
import redlease.asyncio
from redlease._async import lock_claim as async_claim
from redlease._sync import lock_claim as sync_claim

pytestmark = pytest.mark.timeout(60)
WINDOW = 2.0  # long: the grant comes well within it after the waiter joins


def _key(name: str, part: str) -> str:
    return f"redlease:{{{name}}}:{part}"


def granted_sync(client: redis.Redis, name: str, releaser_ttl: float, ttl: float) -> dict[str, Any]:
    """Another runtime holds ``name`` on ``releaser_ttl``; a thread waits with ``ttl`` and is
    granted it by the release. What it believed, and what the server held."""
    holder_client = redis.Redis(connection_pool=client.connection_pool)  # its own runtime
    holder = redlease.Lock(holder_client, name, ttl=releaser_ttl)
    assert holder.acquire()
    waiter = redlease.Lock(client, name, ttl=ttl, handoff=WINDOW)
    seen: dict[str, Any] = {}

    def wait() -> None:
        seen["acquired"] = waiter.acquire(timeout=20)
        holding = waiter._held()
        seen["believed"] = None if holding is None else holding.expires_at - time.monotonic()
        seen["pttl_at_once"] = client.pttl(_key(name, "lock")) / 1000
        time.sleep(0.3)  # a claim, if one was sent, has landed
        seen["pttl"] = client.pttl(_key(name, "lock")) / 1000
        waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    for _ in range(500):  # bounded: until it is queued
        if client.zcard(_key(name, "queue")):
            break
        time.sleep(0.01)
    holder.release()
    thread.join(30)
    redlease.close(holder_client)
    return seen


async def granted_async(
    client: redis.asyncio.Redis, name: str, releaser_ttl: float, ttl: float
) -> dict[str, Any]:
    """The same with redlease.asyncio: a task waits with ``ttl``."""
    holder_client = redis.asyncio.Redis(connection_pool=client.connection_pool)
    holder = redlease.asyncio.Lock(holder_client, name, ttl=releaser_ttl)
    assert await holder.acquire()
    waiter = redlease.asyncio.Lock(client, name, ttl=ttl, handoff=WINDOW)
    seen: dict[str, Any] = {}

    async def wait() -> None:
        seen["acquired"] = await waiter.acquire(timeout=20)
        holding = waiter._held()
        seen["believed"] = None if holding is None else holding.expires_at - time.monotonic()
        seen["pttl_at_once"] = await client.pttl(_key(name, "lock")) / 1000
        await asyncio.sleep(0.3)
        seen["pttl"] = await client.pttl(_key(name, "lock")) / 1000
        await waiter.release()

    task = asyncio.create_task(wait())
    for _ in range(500):
        if await client.zcard(_key(name, "queue")):
            break
        await asyncio.sleep(0.01)
    await holder.release()
    await asyncio.wait_for(task, 30)
    await redlease.asyncio.close(holder_client)
    return seen


def check_same_ttl(seen: dict[str, Any]) -> None:
    assert seen["acquired"]
    assert seen["believed"] > 20  # the 30 s lease at once, not the 2 s window
    assert seen["believed"] <= seen["pttl_at_once"] + 0.05  # never beyond the server's


def test_a_fresh_grant_on_the_same_ttl_is_held_on_it_at_once(client: redis.Redis) -> None:
    check_same_ttl(granted_sync(client, "fresh-same", 30, 30))


async def test_a_fresh_grant_on_the_same_ttl_is_held_on_it_at_once_asyncio(
    async_client: redis.asyncio.Redis,
) -> None:
    check_same_ttl(await granted_async(async_client, "fresh-same-async", 30, 30))


def test_a_fresh_grant_on_a_shorter_lease_is_claimed(client: redis.Redis) -> None:
    seen = granted_sync(client, "fresh-longer", 10, 30)
    assert seen["acquired"] and seen["believed"] <= seen["pttl_at_once"] + 0.05
    assert seen["pttl"] > 20  # its own 30 s lease, not the releaser's 10 s


async def test_a_fresh_grant_on_a_shorter_lease_is_claimed_asyncio(
    async_client: redis.asyncio.Redis,
) -> None:
    seen = await granted_async(async_client, "fresh-longer-async", 10, 30)
    assert seen["acquired"] and seen["believed"] <= seen["pttl_at_once"] + 0.05
    assert seen["pttl"] > 20


def _skips_every_claim(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
    """A grantee that takes any fresh grant's lease for its own (no claim)."""
    cls = getattr(module, name)
    take = cls.take

    def take_as_own(self: Any, hub: Any, waiter: Any) -> Any:
        assert waiter.grant is not None
        self.ttl_ms = waiter.grant[3]
        return take(self, hub, waiter)

    monkeypatch.setattr(cls, "take", take_as_own)


def test_twin_a_grantee_that_never_claims_is_left_on_the_releasers_lease(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    _skips_every_claim(monkeypatch, sync_claim, "Grantee")
    seen = granted_sync(client, "fresh-unclaimed", 10, 30)
    assert seen["acquired"]
    assert seen["pttl"] <= 10  # the check above (> 20) catches it


async def test_twin_the_asyncio_grantee_that_never_claims(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    take = async_claim.AsyncGrantee.take

    async def take_as_own(self: Any, hub: Any, waiter: Any) -> Any:
        self.ttl_ms = waiter.grant[3]
        return await take(self, hub, waiter)

    monkeypatch.setattr(async_claim.AsyncGrantee, "take", take_as_own)
    seen = await granted_async(async_client, "fresh-unclaimed-async", 10, 30)
    assert seen["acquired"]
    assert seen["pttl"] <= 10
