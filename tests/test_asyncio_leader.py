"""The asyncio waiter hub is a leader/follower hub, as the threads' is: a task waiting alone
reads its process' subscription itself, so its grant wakes it with no reader task between.

* a task waiting alone leads, and no reader task runs (the twin: with leading off, a reader
  task reads for it);
* a leader cancelled in the middle of its read (``asyncio.wait_for`` around ``acquire()``)
  hands the reading on: the task that follows it is woken by its own grant at once, on the
  same subscription (the twin: a leader that rang nobody leaves the follower asleep until
  the lease it was told about runs out);
* a leader cancelled while it hands out another task's grant wakes that task, which tries
  again and claims the grant it finds (the twin: without that wake-up it sleeps on).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async import hub as hub_module
from redlease._async import lock_claim
from redlease._async.runtime import runtime_for
from redlease._synchronization import AsyncBackground

pytestmark = pytest.mark.timeout(60)


def _readers() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if "redlease-waiters" in t.get_name() and not t.done()]


async def _until(check: Any, limit: float = 10.0) -> None:
    for _ in range(int(limit / 0.01)):  # bounded
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")


async def _leading(client: redis.asyncio.Redis, name: str) -> dict[str, Any]:
    """Another client holds ``name``; a task on ``client`` waits for it. Who reads meanwhile."""
    holder_client = redis.asyncio.Redis(connection_pool=client.connection_pool)
    holder = redlease.Lock(holder_client, name, ttl=30)
    assert await holder.acquire()
    waiter = redlease.Lock(client, name, ttl=30)
    task = asyncio.create_task(waiter.acquire(timeout=20))
    hub = runtime_for(client).hub
    await _until(lambda: hub._leader is not None or bool(_readers()))
    await asyncio.sleep(0.2)  # settled: subscribed, queued, asleep
    seen = {"leading": hub._leader is not None, "readers": len(_readers())}
    await holder.release()
    seen["acquired"] = await asyncio.wait_for(task, 20)
    await waiter.release()
    await redlease.close(holder_client)
    return seen


async def test_a_task_waiting_alone_reads_its_own_grant(
    async_client: redis.asyncio.Redis,
) -> None:
    seen = await _leading(async_client, "async-leader")
    assert seen == {"leading": True, "readers": 0, "acquired": True}


async def test_twin_without_leading_a_reader_task_reads(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AsyncBackground, "LEADS", False)
    seen = await _leading(async_client, "async-follower")
    assert seen == {"leading": False, "readers": 1, "acquired": True}


class Queue:
    """Locks ``name-<part>`` held on another client, and a task on ``client`` waiting for
    each, queued in order: the first leads the hub, the others follow it."""

    def __init__(self, client: redis.asyncio.Redis, name: str) -> None:
        self.name = name
        self.holder_client = redis.asyncio.Redis(connection_pool=client.connection_pool)
        self.hub = runtime_for(client).hub
        self._client = client
        self.held: dict[str, Any] = {}
        self.locks: dict[str, Any] = {}
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.fences: dict[str, int | None] = {}

    async def wait_on(self, *parts: str) -> None:
        for part in parts:
            self.held[part] = redlease.Lock(self.holder_client, f"{self.name}-{part}", ttl=30)
            assert await self.held[part].acquire()
        for count, part in enumerate(parts):
            self.locks[part] = redlease.Lock(self._client, f"{self.name}-{part}", ttl=30)
            self.tasks[part] = asyncio.create_task(self.locks[part].acquire(timeout=20))
            await _until(lambda n=count: self._queued(n))

    def _queued(self, followers: int) -> bool:
        return self.hub._leader is not None and len(self.hub._followers) == followers

    async def got(self, part: str) -> bool:
        """Whether ``part``'s task got its lock within 3 s (released again if so)."""
        task = self.tasks[part]
        done, _ = await asyncio.wait({task}, timeout=3.0)
        if done and task.result():
            self.fences[part] = self.locks[part].fence
            await self.locks[part].release()
            return True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return False

    async def close(self) -> None:
        for part, task in self.tasks.items():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if await self.held[part].owned():
                await self.held[part].release()
        await redlease.close(self.holder_client)


async def _cancel_the_leader(client: redis.asyncio.Redis, name: str) -> dict[str, Any]:
    """Task A waits on one lock (it leads), task B on another (it follows); A is cancelled;
    B's lock is released. Whether B gets it at once."""
    queue = Queue(client, name)
    await queue.wait_on("a", "b")
    pubsub = queue.hub._pubsub
    queue.tasks["a"].cancel()
    with pytest.raises(asyncio.CancelledError):
        await queue.tasks["a"]
    await queue.held["b"].release()
    seen = {"woken": await queue.got("b"), "same_subscription": queue.hub._pubsub is pubsub}
    await queue.close()
    return seen


async def test_a_cancelled_leader_hands_the_reading_on(
    async_client: redis.asyncio.Redis,
) -> None:
    seen = await _cancel_the_leader(async_client, "leader-cancelled")
    assert seen["woken"] is True  # within 3 s, not the 30 s lease
    assert seen["same_subscription"]  # the cancelled read did not break it


async def test_twin_a_leader_that_rings_nobody_leaves_the_follower_asleep(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module.AsyncHub, "_successor", lambda self: [])
    seen = await _cancel_the_leader(async_client, "leader-silent")
    assert seen["woken"] is False


async def _cancelled_while_granting(
    client: redis.asyncio.Redis, name: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Task A leads (waiting on one lock), tasks C then B follow (waiting on two others); the
    grant of B's lock is read by A, which is cancelled while it hands it out: C is rung to
    lead. Whether B, asleep, gets the lock, and with which fence."""
    queue = Queue(client, name)
    await queue.wait_on("a", "c", "b")

    async def cancelled(self: Any, hub: Any, waiter: Any) -> Any:
        raise asyncio.CancelledError  # as if A were cancelled right here

    monkeypatch.setattr(lock_claim.AsyncGrantee, "take", cancelled)
    await queue.held["b"].release()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(queue.tasks["a"], 10)
    monkeypatch.undo()
    seen: dict[str, Any] = {"woken": await queue.got("b")}
    seen["fence"] = queue.fences.get("b")
    seen["granted_fence"] = int(await client.get(f"redlease:{{{name}-b}}:fence") or 0)
    await queue.close()
    return seen


async def test_a_leader_cancelled_while_handing_out_a_grant_wakes_its_grantee(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = await _cancelled_while_granting(async_client, "leader-granting", monkeypatch)
    assert seen["woken"] is True  # it tried again, and found the grant its own
    assert seen["fence"] == seen["granted_fence"]  # the grant's fence: it claimed that grant


async def test_twin_without_the_wake_up_the_grantee_sleeps_on(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module.AsyncHub, "_wake_all", staticmethod(lambda woken: None))
    seen = await _cancelled_while_granting(async_client, "leader-granting-twin", monkeypatch)
    assert seen["woken"] is False
