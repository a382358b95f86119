"""The shared scripts' contracts, one transition at a time (``lua/shared_*.lua``).

A Semaphore (stored permits), a ReadWriteLock (a writer asks for everything) and an Election
(capacity 1, the leader's value in the payload) all run these scripts, with the KEYS and ARGV
their shells build (``_core/shared.py``, ``_core/semaphore.py``, ``_core/election.py``).
"""

from __future__ import annotations

from typing import Any

import redis

from redlease._core import shared
from redlease._core.election import WATCH, Leader, decode_watch, election_keys
from redlease._core.rwlock import rwlock_keys
from redlease._core.scripts import Script
from redlease._core.semaphore import SET_PERMITS, semaphore_keys
from redlease._core.shared import EVERYTHING, SharedKeys
from tests.lua.conftest import CHANNELS

LEASE, WINDOW = 10_000, 500
SEM = semaphore_keys("redlease", b"s")
RW = rwlock_keys("redlease", b"rw")
ELECTION = election_keys("redlease", b"e")


def run(client: redis.Redis, script: Script, keys: SharedKeys, args: list[Any]) -> Any:
    return client.evalsha(client.script_load(script.source), 8, *keys.in_order(), *args)


def acquire(
    client: redis.Redis,
    keys: SharedKeys,
    token: bytes,
    *,
    want: int = 1,
    join: bool = True,
    cap: int = 2,
    stored: bool = True,
    over: bytes = b"",
    value: bytes | None = None,
) -> list[int]:
    args: list[Any] = [token, LEASE, want, int(join), WINDOW, CHANNELS, cap, int(stored), over]
    if value is not None:
        args.append(value)
    return [int(x) for x in run(client, shared.ACQUIRE, keys, args)]


def renew(client: redis.Redis, *pairs: bytes) -> list[int]:
    """shared_renew.lua over (holders key, token) pairs, each for LEASE ms."""
    keys, tokens = pairs[::2], pairs[1::2]
    args = [x for token in tokens for x in (token, LEASE)]
    sha = client.script_load(shared.RENEW.source)
    return [int(x) for x in client.evalsha(sha, len(keys), *keys, *args)]


def queue_args(token: bytes, cap: int = 2, stored: bool = True) -> list[Any]:
    return [token, WINDOW, CHANNELS, cap, int(stored)]


def test_a_semaphore_grants_its_permits_with_increasing_fences_then_refuses(
    client: redis.Redis,
) -> None:
    first = acquire(client, SEM, b"p1.a")
    second = acquire(client, SEM, b"p2.b")
    assert first[0] == second[0] == 1 and second[1] > first[1]
    assert first[2] == second[2] == 2  # the stored permits end each reply
    status, ms, cap = acquire(client, SEM, b"p3.c")
    assert status == 0 and 0 < ms <= LEASE and cap == 2  # until the first lease ends
    assert client.zrange(SEM.queue, 0, -1) == [b"p3.c"]


def test_the_stored_permits_win_over_the_callers(client: redis.Redis) -> None:
    assert acquire(client, SEM, b"p1.a", cap=1)[2] == 1
    status, _, permits = acquire(client, SEM, b"p2.b", cap=5, join=False)
    assert (status, permits) == (0, 1)  # 1 permit, held: the caller is told it differs


def test_a_release_reserves_the_freed_permit_for_the_queue_head(client: redis.Redis) -> None:
    acquire(client, SEM, b"p1.a", cap=1)
    acquire(client, SEM, b"p2.b", cap=1)
    assert run(client, shared.RELEASE, SEM, queue_args(b"p1.a", 1)) == 1
    assert client.zrange(SEM.granted, 0, -1) == [b"p2.b"]  # woken, its turn
    # Not past the reserved waiter: p3 is next, and checks when the reservation lapses.
    status, ms, _ = acquire(client, SEM, b"p3.c", cap=1)
    assert status == 2 and 0 < ms <= WINDOW
    assert acquire(client, SEM, b"p2.b", cap=1)[0] == 1
    assert client.zrange(SEM.queue, 0, -1) == [b"p3.c"] and client.zcard(SEM.granted) == 0


def test_twin_without_a_release_nobody_is_reserved(client: redis.Redis) -> None:
    """The twin: the same queue without the release reserves nothing, so the reservation
    above is the release's."""
    acquire(client, SEM, b"p1.a", cap=1)
    acquire(client, SEM, b"p2.b", cap=1)
    assert client.zcard(SEM.granted) == 0
    assert acquire(client, SEM, b"p2.b", cap=1)[0] == 0


def test_a_release_or_renew_of_a_token_that_holds_nothing_changes_nothing(
    client: redis.Redis,
) -> None:
    acquire(client, SEM, b"p1.a", cap=1)
    assert run(client, shared.RELEASE, SEM, queue_args(b"p9.z", 1)) == 0
    assert renew(client, SEM.holders, b"p9.z") == [0]
    assert client.zrange(SEM.holders, 0, -1) == [b"p1.a"]
    assert renew(client, SEM.holders, b"p1.a", RW.holders, b"p9.z") == [1, 0]  # a batch


def test_an_expired_holder_is_purged_and_cannot_renew_or_release(client: redis.Redis) -> None:
    acquire(client, SEM, b"p1.a", cap=1)
    client.zadd(SEM.holders, {b"p1.a": 1}, xx=True)  # its lease ran out
    assert renew(client, SEM.holders, b"p1.a") == [0]
    assert acquire(client, SEM, b"p2.b", cap=1)[0] == 1  # the permit came back
    assert run(client, shared.RELEASE, SEM, queue_args(b"p1.a", 1)) == 0


def test_leave_takes_a_waiter_out_and_passes_its_reservation_on(client: redis.Redis) -> None:
    acquire(client, SEM, b"p1.a", cap=1)
    acquire(client, SEM, b"p2.b", cap=1)
    acquire(client, SEM, b"p3.c", cap=1)
    run(client, shared.RELEASE, SEM, queue_args(b"p1.a", 1))
    assert run(client, shared.LEAVE, SEM, queue_args(b"p2.b", 1)) == 1
    assert client.zrange(SEM.granted, 0, -1) == [b"p3.c"]
    assert run(client, shared.LEAVE, SEM, queue_args(b"p2.b", 1)) == 0  # not queued any more


def test_set_permits_wakes_the_waiters_that_now_fit(client: redis.Redis) -> None:
    acquire(client, SEM, b"p1.a", cap=1)
    acquire(client, SEM, b"p2.b", cap=1)
    acquire(client, SEM, b"p3.c", cap=1)
    assert run(client, SET_PERMITS, SEM, [3, WINDOW, CHANNELS]) == 1
    assert set(client.zrange(SEM.granted, 0, -1)) == {b"p2.b", b"p3.c"}
    assert run(client, SET_PERMITS, SEM, [1, WINDOW, CHANNELS]) == 3
    assert acquire(client, SEM, b"p4.d", cap=3, join=False)[0] == 0  # 1 permit, held


def test_a_writer_excludes_readers_and_a_waiting_writer_stops_new_readers(
    client: redis.Redis,
) -> None:
    def rw(token: bytes, want: int = 1, over: bytes = b"") -> int:
        return acquire(client, RW, token, want=want, cap=EVERYTHING, stored=False, over=over)[0]

    assert rw(b"p1.r") == rw(b"p2.r") == 1  # any number of readers
    assert rw(b"p3.w", EVERYTHING) == 0  # the writer waits for them
    assert rw(b"p4.r") == 0  # strict FIFO: no reader passes the waiting writer
    args = queue_args(b"p1.r", EVERYTHING, False)
    run(client, shared.RELEASE, RW, args)
    run(client, shared.RELEASE, RW, [b"p2.r", *args[1:]])
    assert rw(b"p3.w", EVERYTHING) == 1
    assert rw(b"p5.r") == 0  # the writer holds everything
    assert rw(b"p6.r", over=b"p3.w") == 1  # but its own hold may take a read share


def test_an_election_keeps_the_leaders_value_and_a_watcher_sees_the_change(
    client: redis.Redis,
) -> None:
    status, term = acquire(client, ELECTION, b"p1.a", cap=1, stored=False, value=b"node-1")
    assert status == 1
    assert client.hget(ELECTION.payload, b"p1.a") == b"%d node-1" % term
    watch = [b"p2.w", 1, -1, CHANNELS, 60_000, 0]
    changed, leader, latest = decode_watch(run(client, WATCH, ELECTION, watch))
    assert changed and leader == Leader("node-1", term) and latest == term
    watch[2] = term  # the watcher knows this term: unchanged, until the lease ends
    changed, _, ms = decode_watch(run(client, WATCH, ELECTION, watch))
    assert not changed and 0 < ms <= LEASE
    assert client.zrange(ELECTION.watchers, 0, -1) == [b"p2.w"]
    run(client, shared.RELEASE, ELECTION, queue_args(b"p1.a", 1, False))
    watch[5] = term  # and has been told of it
    changed, leader, _ = decode_watch(run(client, WATCH, ELECTION, watch))
    assert changed and leader is None  # nobody leads now


def test_inspect_reads_the_holders_without_changing_anything(client: redis.Redis) -> None:
    fence = acquire(client, SEM, b"p1.a")[1]
    acquire(client, SEM, b"p2.b", want=1)
    before = client.zrange(SEM.holders, 0, -1, withscores=True)
    snap = shared.decode_inspect(run(client, shared.INSPECT, SEM, [b"p1.a", 2, 1]), "s", SEM)
    assert (snap.capacity, snap.used, snap.waiters) == (2, 2, 0)
    assert snap.fence > fence and snap.mine is not None and 0 < snap.mine <= LEASE / 1000
    assert {h.token for h in snap.holders} == {b"p1.a", b"p2.b"}
    assert client.zrange(SEM.holders, 0, -1, withscores=True) == before
