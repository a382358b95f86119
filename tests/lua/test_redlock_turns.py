"""Redlock's waiting turns in the lock scripts (mode "R", reservations): who must watch a
reserved head.

A release reserves the free lock for the queue head and tells the waiter right behind it
(``N``) when to check that the head took its turn (a dead head is skipped then). A waiter
refused while the lock is reserved learns its place in the queue (acquire_reserving.lua's
``rank``): only the one right behind the head checks; the others sleep until they are told
more, instead of asking every server again when each reservation ends. A waiter that leaves
the second place while a reservation runs passes the watch on (leave.lua tells the new
second). A waiter that undoes a split vote is queued under its ticket where it releases
(release.lua ``requeue``), and is not told of a reservation for itself.
"""

from __future__ import annotations

from typing import Any

import redis

from redlease._core.lock import ACQUIRE_RESERVING, LEAVE, RELEASE, LockKeys
from tests.lua.conftest import CHANNELS

KEYS = LockKeys.build("redlease", b"turns")
WINDOW, LEASE = 5_000, 10_000  # a long window: the reservation runs through each test


def acquire(client: redis.Redis, token: bytes, ticket: int) -> list[int]:
    keys = [KEYS.lock, KEYS.fence, KEYS.queue, KEYS.handoff]
    args = [token, LEASE, 1, WINDOW, CHANNELS, ticket, b"1"]
    return [int(x) for x in client.eval(ACQUIRE_RESERVING.source, 4, *keys, *args)]


def release(
    client: redis.Redis, token: bytes, *, leave: bool = False, requeue: int | None = None
) -> int:
    script = LEAVE if leave else RELEASE
    keys = KEYS.in_order()
    args: list[Any] = [token, WINDOW, CHANNELS, b"R", 0, b"1"]
    if requeue is not None:
        args += [0, f"{requeue} {LEASE}"]
    return int(client.eval(script.source, 4, *keys, *args))


def reserved_for_head(client: redis.Redis) -> None:
    """p1 holds the lock, p2 queues, p1 releases: the lock is reserved for p2."""
    assert acquire(client, b"p1.a", 1)[0] == 1
    assert acquire(client, b"p2.b", 2)[0] == 0
    assert release(client, b"p1.a") == 1
    assert (client.get(KEYS.handoff) or b"").startswith(b"p2.b ")


def test_a_waiter_refused_by_a_reservation_learns_its_place(client: redis.Redis) -> None:
    """Right behind the reserved head: rank 1 (it must check on the head); further back: 2."""
    reserved_for_head(client)
    status, ms, _now, rank = acquire(client, b"p3.c", 3)
    assert (status, rank) == (2, 1) and 0 < ms <= WINDOW
    status, ms, _now, rank = acquire(client, b"p4.d", 4)
    assert (status, rank) == (2, 2) and 0 < ms <= WINDOW


def test_a_held_lock_refuses_with_its_lease_and_no_place(client: redis.Redis) -> None:
    """The reply of a refusal by a held lock is unchanged: status 0, the lease left, the time."""
    assert acquire(client, b"p1.a", 1)[0] == 1
    reply = acquire(client, b"p2.b", 2)
    assert len(reply) == 3 and reply[0] == 0 and 0 < reply[1] <= LEASE


def test_the_second_that_leaves_passes_the_watch_on(client: redis.Redis, listen: Any) -> None:
    """p3 (right behind the reserved head p2) leaves: p4, second now, is told N with the time
    the reservation has left, so a dead p2 is still skipped when its turn ends."""
    reserved_for_head(client)
    acquire(client, b"p3.c", 3)
    acquire(client, b"p4.d", 4)
    messages = listen(b"p4")
    assert release(client, b"p3.c", leave=True) == 1
    told = messages()
    assert len(told) == 1 and told[0].startswith(b"Np4.d ")
    assert 0 < int(told[0].split(b" ")[1]) <= WINDOW


def test_twin_a_waiter_further_back_that_leaves_tells_nobody_new(
    client: redis.Redis, listen: Any
) -> None:
    """The twin: when p4 leaves, the second (p3) stays the same; the N goes to p3, who knew
    (harmless), and p5 hears nothing: the message above is the leave's doing, for the new
    second only."""
    reserved_for_head(client)
    for i, p in enumerate((b"p3.c", b"p4.d", b"p5.e")):
        acquire(client, p, 3 + i)
    messages = listen(b"p5")
    assert release(client, b"p4.d", leave=True) == 1
    assert messages() == []


def test_an_undone_grant_requeues_its_waiter_ahead_of_later_tickets(
    client: redis.Redis, listen: Any
) -> None:
    """p1 (ticket 1) was granted the free lock here, p2 (ticket 2) queued behind: p1 undoes
    its split vote with requeue. It is queued under ticket 1, so the reservation is p1's, as
    on the servers that queued it; p1 is not told (it knows), p2 is told to watch (N)."""
    assert acquire(client, b"p1.a", 1)[0] == 1
    assert acquire(client, b"p2.b", 2)[0] == 0
    messages = listen(b"p1", b"p2")
    assert release(client, b"p1.a", requeue=1) == 1
    assert client.zrange(KEYS.queue, 0, -1, withscores=True) == [(b"p1.a", 1.0), (b"p2.b", 2.0)]
    assert (client.get(KEYS.handoff) or b"").startswith(b"p1.a ")
    assert client.pttl(KEYS.queue) > 0
    told = messages()
    assert len(told) == 1 and told[0].startswith(b"Np2.b "), told


def test_twin_an_undone_grant_without_requeue_reserves_it_for_another(
    client: redis.Redis,
) -> None:
    """The twin: a plain release leaves p1 out of this queue and reserves the lock for p2,
    while the servers that queued p1 reserve it for p1: the next vote splits."""
    assert acquire(client, b"p1.a", 1)[0] == 1
    assert acquire(client, b"p2.b", 2)[0] == 0
    assert release(client, b"p1.a") == 1
    assert client.zrange(KEYS.queue, 0, -1) == [b"p2.b"]
    assert (client.get(KEYS.handoff) or b"").startswith(b"p2.b ")


def test_a_requeue_by_a_token_that_does_not_hold_the_lock_changes_nothing(
    client: redis.Redis,
) -> None:
    """Only the holder's release requeues: another token's changes neither lock nor queue."""
    assert acquire(client, b"p1.a", 1)[0] == 1
    assert release(client, b"p9.z", requeue=0) == 0
    assert client.get(KEYS.lock) == b"p1.a"
    assert client.exists(KEYS.queue) == 0
