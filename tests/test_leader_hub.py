"""The sync waiter hub reads with the waiting threads (leader/follower), and a granted lock's
claim reply is read before its ``acquire()`` returns.

* A thread waiting alone on its hub reads the subscription itself: its grant wakes it with no
  reader thread in between (the twin: a hub that does not let waiters lead keeps a reader).
* A thread granted the lock on the short lease of the hand-off window returns once its claim's
  reply is read, and holds the lock on its full lease past the window (the twin: were the
  reply not applied, the handle would take the grant's short lease, forget the lock after it,
  and refuse to release a lock that Redis holds).
* Threads following a leader lose no wake-up when it stops reading (a crowd, taking turns).

asyncio's hub leads the same way: tests/test_asyncio_leader.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

import redlease
from redlease._sync import lock_claim
from redlease._sync.runtime import runtime_for
from redlease._synchronization import Background

pytestmark = pytest.mark.timeout(60)
HANDOFF = 0.2


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "redlease-waiters" and t.is_alive()]


def _granted_after_waiting(client: redis.Redis, name: str, hold: float = 0.0) -> dict[str, Any]:
    """A second client holds ``name``; a thread on ``client`` waits for it, is granted it by
    the release, and holds it ``hold`` seconds. What the waiting thread saw."""
    holder_client = redis.Redis(connection_pool=client.connection_pool)  # its own runtime
    holder = redlease.Lock(holder_client, name, ttl=30)
    assert holder.acquire()
    seen: dict[str, Any] = {}
    waiter = redlease.Lock(client, name, ttl=30, handoff=HANDOFF)

    def wait() -> None:
        seen["acquired"] = waiter.acquire(timeout=20)
        time.sleep(hold)
        seen["owned"] = waiter.owned()
        seen["remaining"] = waiter.remaining()
        seen["pttl"] = client.pttl(f"redlease:{{{name}}}:lock")
        seen["again"] = waiter.acquire(blocking=False)  # contention, as for threading.Lock
        try:
            waiter.release()
            seen["released"] = True
        except redlease.LockError as exc:
            seen["released"] = exc

    thread = threading.Thread(target=wait)
    thread.start()
    hub = runtime_for(client).hub
    deadline = time.monotonic() + 10
    while hub._leader is None and time.monotonic() < deadline:  # queued, and asleep
        time.sleep(0.01)
    seen["leading"] = hub._leader is not None
    seen["readers"] = len(_readers())
    time.sleep(HANDOFF + 0.1)  # queued longer than the window: granted on its short lease
    holder.release()
    thread.join(30)
    redlease.close(holder_client)
    return seen


def test_a_thread_waiting_alone_reads_its_own_grant(client: redis.Redis) -> None:
    seen = _granted_after_waiting(client, "leader")
    assert seen["acquired"] and seen["owned"] and seen["released"] is True
    assert seen["leading"]
    assert seen["readers"] == 0


def test_twin_a_hub_whose_waiters_do_not_lead_keeps_a_reader_thread(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Background, "LEADS", False)
    holder_client = redis.Redis(connection_pool=client.connection_pool)
    holder = redlease.Lock(holder_client, "follower", ttl=30)
    assert holder.acquire()
    waiter = redlease.Lock(client, "follower", ttl=30)
    thread = threading.Thread(target=lambda: waiter.acquire(timeout=20) and waiter.release())
    thread.start()
    time.sleep(0.5)  # queued, and asleep
    assert runtime_for(client).hub._leader is None
    assert len(_readers()) >= 1
    holder.release()
    thread.join(30)
    redlease.close(holder_client)


def test_a_grant_held_past_the_handoff_window_is_held_on_its_full_lease(
    client: redis.Redis,
) -> None:
    seen = _granted_after_waiting(client, "settled", hold=5 * HANDOFF)
    assert seen["acquired"]
    assert seen["owned"]
    assert seen["remaining"] > 20  # the 30 s lease, not what is left of the grant's 0.2 s
    assert seen["pttl"] > 20_000
    assert seen["again"] is False  # its own thread: contention
    assert seen["released"] is True


def test_twin_a_grant_whose_claim_is_not_applied_is_judged_on_its_short_lease(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were the claim's reply not applied to the holding, the handle would believe the grant's
    short lease although Redis holds the lock for the whole lease: local bookkeeping would
    lose a lock that is held."""
    real = lock_claim.Grantee.settle

    def settle_unapplied(self: Any, hub: Any, waiter: Any, result: Any, ok: Any, sent: Any) -> None:
        real(self, hub, waiter, result, ok, None if ok is True else sent)

    monkeypatch.setattr(lock_claim.Grantee, "settle", settle_unapplied)
    seen = _granted_after_waiting(client, "unsettled", hold=5 * HANDOFF)
    assert seen["acquired"]
    assert seen["pttl"] > 20_000  # the claim landed: Redis holds it for the lease
    assert seen["owned"]  # Redis says so too
    # but the handle judged it on the grant's 0.2 s: it forgot the lock it holds
    assert isinstance(seen["released"], redlease.LockNotOwned)


def test_threads_following_a_leader_lose_no_wake_up(client: redis.Redis) -> None:
    """Eight threads on one lock and one client take turns, 5 times each, with a 30 s lease:
    a wake-up lost when a leader stops reading would cost a whole lease and fail the test."""
    done: list[int] = []

    def worker(i: int) -> None:
        lock = redlease.Lock(client, "crowd-threads", ttl=30.0, handoff=HANDOFF)
        for _ in range(5):
            assert lock.acquire(timeout=20)
            time.sleep(0.002)
            lock.release()
        done.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(40)
    assert sorted(done) == list(range(8))
    assert time.monotonic() - started < 15  # generous: a lost wake-up costs 30 s
