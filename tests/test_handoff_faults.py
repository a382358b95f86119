"""Faults in the direct hand-off: the release script grants the lock to the queue head, and the
message that tells it may never be heard.

* the grantee dies after the grant, before it hears the message: the next waiter gets the lock
  once the grant's short lease (the ``handoff`` window) ends, never after a whole lease;
  unless it joined the queue less than a window before the grant: then it was granted the
  releaser's lease, and holds it as a process that took the lock itself would;
* the grantee's subscription drops between the grant and the delivery: the grantee, woken by
  the broken connection, claims the grant it never heard (its own token holds the lock), with
  the fence the grant issued.

Each has a twin that shows the check can fail.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease
import redlease.asyncio
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(120)
SPAWN = multiprocessing.get_context("spawn")
LEASE = 30.0  # far beyond every bound below: reaching it would fail the tests


def wait_and_report(url: str, name: str, handoff: float, report: Any, mode: str = "sync") -> None:
    """A waiter in its own process: report the fence it acquired with (asyncio: the same with
    redlease.asyncio on an event loop)."""
    if mode == "asyncio":
        asyncio.run(_wait_and_report_async(url, name, handoff, report))
        return
    client = redis.Redis.from_url(url)
    lock = redlease.Lock(client, name, ttl=LEASE, handoff=handoff)
    started = time.monotonic()
    acquired = lock.acquire(timeout=60)
    report.put(("acquired", acquired, lock.fence, time.monotonic() - started))
    time.sleep(0.2)
    if acquired:
        lock.release()
    redlease.close(client)


async def _wait_and_report_async(url: str, name: str, handoff: float, report: Any) -> None:
    client = redis.asyncio.Redis.from_url(url)
    lock = redlease.asyncio.Lock(client, name, ttl=LEASE, handoff=handoff)
    started = time.monotonic()
    acquired = await lock.acquire(timeout=60)
    report.put(("acquired", acquired, lock.fence, time.monotonic() - started))
    await asyncio.sleep(0.2)
    if acquired:
        await lock.release()
    await redlease.asyncio.close(client)
    await client.aclose()


def queued(client: redis.Redis, name: str) -> int:
    return int(client.zcard(f"redlease:{{{name}}}:queue"))


def until(check: Any, limit: float = 30.0) -> None:
    """Wait (bounded) until ``check()`` is true."""
    end = time.monotonic() + limit
    while not check():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.01)


def freeze(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it has stopped (delivery is async)."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        tasks = os.listdir(f"/proc/{pid}/task")
        states = []
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        return all(state in ("T", "t") for state in states)

    until(stopped, 10.0)


def pubsub_clients(client: redis.Redis) -> list[dict[str, Any]]:
    return [c for c in client.client_list() if int(c.get("sub", 0) or 0) > 0]


def grant_to_a_dead_waiter(
    server: RedisServer, name: str, handoff: float, queued_for: float
) -> tuple[bool, int, int, int]:
    """Hold ``name``; queue a waiter process, then a waiter thread behind it; freeze the
    process, release once it has been queued ``queued_for`` s (the script grants it the lock:
    it still listens), kill it unheard.

    Returns whether the thread got the lock within 3 s, the fence it got, the fence of the
    grant to the dead waiter and the grant's lease (ms left just after it).
    """
    probe = server.client()
    probe.delete(*[f"redlease:{{{name}}}:{k}" for k in ("lock", "fence", "queue", "handoff")])
    holder_client = server.client()
    holder = redlease.Lock(holder_client, name, ttl=LEASE, handoff=handoff)
    assert holder.acquire()
    report = SPAWN.Queue()
    first = SPAWN.Process(target=wait_and_report, args=(server.url, name, handoff, report))
    first.start()
    second_client = server.client()
    got: list[Any] = []
    try:
        until(lambda: queued(probe, name) == 1)
        joined = time.monotonic()
        second = redlease.Lock(second_client, name, ttl=LEASE, handoff=handoff)

        def wait() -> None:
            got.append(second.acquire(timeout=3.0))
            got.append(second.fence)
            if got[0]:
                second.release()

        thread = threading.Thread(target=wait)
        thread.start()
        until(lambda: queued(probe, name) == 2)
        freeze(first.pid or 0)
        time.sleep(max(0.0, joined + queued_for - time.monotonic()))
        holder.release()  # grants the lock to the frozen process: its subscription is alive
        granted = probe.get(f"redlease:{{{name}}}:lock")
        assert granted is not None and queued(probe, name) == 1  # granted to the first
        dead_fence = int(probe.get(f"redlease:{{{name}}}:fence") or 0)
        lease_ms = int(probe.pttl(f"redlease:{{{name}}}:lock"))
        os.kill(first.pid or 0, signal.SIGKILL)  # dies without ever hearing of it
        thread.join(30)
        assert not thread.is_alive()
    finally:
        if first.is_alive():
            os.kill(first.pid or 0, signal.SIGKILL)
        first.join(10)
        redlease.close(holder_client)
        redlease.close(second_client)
    return bool(got[0]), int(got[1] or 0), dead_fence, lease_ms


def test_a_grantee_that_dies_unheard_is_skipped_after_the_handoff_window(
    server: RedisServer,
) -> None:
    acquired, fence, dead_fence, _ = grant_to_a_dead_waiter(
        server, "dead-grantee", handoff=0.25, queued_for=0.5
    )
    assert acquired  # within 3 s: the grant's short lease (0.25 s), not the 30 s lease
    assert fence > dead_fence  # a fence of its own, after the dead grantee's


def test_twin_a_grant_on_a_long_lease_would_keep_the_next_waiter_out(
    server: RedisServer,
) -> None:
    """The twin: were the grant's lease long (here 20 s), the next waiter would not get the
    lock within 3 s, so the test above can fail."""
    acquired, _, _, _ = grant_to_a_dead_waiter(
        server, "dead-grantee-twin", handoff=20.0, queued_for=0.5
    )
    assert not acquired


def test_a_grantee_that_joined_within_the_window_holds_it_as_a_taker_would(
    server: RedisServer,
) -> None:
    """A waiter granted the lock less than the window after it joined the queue is granted
    the releaser's lease (30 s): dead unheard, it keeps the next waiter out, as a process that
    took the lock itself and died would (docs/safety.md, guarantee 3)."""
    acquired, _, _, lease_ms = grant_to_a_dead_waiter(
        server, "dead-fresh-grantee", handoff=2.0, queued_for=0.0
    )
    assert lease_ms > 20_000  # the releaser's 30 s, not the 2 s window
    assert not acquired


def lost_grant(
    server: RedisServer,
    name: str,
    handoff: float,
    frozen: float,
    mode: str = "sync",
    queued_for: float = 0.0,
) -> tuple[Any, ...]:
    """Hold ``name`` with a waiter process queued; freeze it, release (the grant) once it has
    been queued ``queued_for`` s, kill its subscription so the message is lost, thaw it after
    ``frozen`` s. Returns its report and the fence the grant issued."""
    probe = server.client()
    probe.delete(*[f"redlease:{{{name}}}:{k}" for k in ("lock", "fence", "queue", "handoff")])
    holder_client = server.client()
    holder = redlease.Lock(holder_client, name, ttl=LEASE, handoff=handoff)
    assert holder.acquire()
    before = {c["id"] for c in pubsub_clients(probe)}
    report = SPAWN.Queue()
    waiter = SPAWN.Process(target=wait_and_report, args=(server.url, name, handoff, report, mode))
    waiter.start()
    try:
        until(lambda: queued(probe, name) == 1)
        joined = time.monotonic()
        subscriptions = [c["id"] for c in pubsub_clients(probe) if c["id"] not in before]
        assert len(subscriptions) == 1
        freeze(waiter.pid or 0)
        time.sleep(max(0.0, joined + queued_for - time.monotonic()))
        holder.release()  # the grant; its message waits in the server's output buffer
        granted_fence = int(probe.get(f"redlease:{{{name}}}:fence") or 0)
        probe.client_kill_filter(_id=subscriptions[0])  # the message is lost with it
        time.sleep(frozen)
        os.kill(waiter.pid or 0, signal.SIGCONT)
        result = report.get(timeout=60)
    finally:
        if waiter.is_alive():
            os.kill(waiter.pid or 0, signal.SIGCONT)
        waiter.join(30)
        redlease.close(holder_client)
    return (*result, granted_fence)


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_a_grant_whose_message_is_lost_is_claimed_when_the_subscription_breaks(
    server: RedisServer, mode: str
) -> None:
    # A long hand-off window: the grant is surely still open when the grantee wakes up.
    kind, acquired, fence, waited, granted_fence = lost_grant(
        server, f"lost-grant-{mode}", 10.0, 0.0, mode
    )
    assert (kind, acquired) == ("acquired", True)
    assert fence == granted_fence  # it claimed the grant itself, not a later acquisition
    assert waited < 8.0  # not the grant's 10 s window (nor the 30 s lease)


def test_twin_a_grant_that_lapsed_gives_a_later_fence(server: RedisServer) -> None:
    """The twin of the fence check: when the grant's window (0.3 s) lapses while the grantee
    is frozen (1 s), it takes the lock afresh, with a larger fence, so the check above tells
    a claimed grant from a new acquisition. (Queued longer than the window, it is granted the
    window's short lease, not the releaser's.)"""
    kind, acquired, fence, _, granted_fence = lost_grant(
        server, "lapsed-grant", 0.3, 1.0, queued_for=0.5
    )
    assert (kind, acquired) == ("acquired", True)
    assert fence > granted_fence
