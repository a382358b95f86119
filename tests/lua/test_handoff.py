"""The hand-off modes of the lock scripts, one transition at a time (``lua/lock_lib.lua``).

Fair ("G"): a release grants the lock to the first queued waiter whose process listens, with a
fresh fence and the short lease of the hand-off window (the releaser's lease if it joined the
queue within the window); a waiter whose process does not listen is skipped at once.
Barging ("B"): a release wakes the queue head ("F") and lets anyone take the lock, until the
head has waited ``barge`` ms; then a release grants it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from redlease._core.lock import ACQUIRE, CLAIM, LEAVE, RELEASE, RESERVING, LockKeys
from tests.lua.conftest import CHANNELS

KEYS = LockKeys.build("redlease", b"handoff")
WINDOW, LEASE = 500, 10_000


def acquire(client: redis.Redis, token: bytes, mode: bytes, join: bool = True) -> list[int]:
    keys = [KEYS.lock, KEYS.fence, KEYS.queue, KEYS.handoff]
    args = [token, LEASE, int(join), WINDOW, CHANNELS]
    if mode == RESERVING:
        args += [b"", b"1"]  # score (the server's time), tell
    return [int(x) for x in client.eval(ACQUIRE[mode].source, 4, *keys, *args)]


def release(
    client: redis.Redis,
    token: bytes,
    mode: bytes,
    barge: int = 0,
    *,
    leave: bool = False,
    rotation: int = 0,
) -> int:
    script = LEAVE if leave else RELEASE
    keys = KEYS.in_order()
    args = [token, WINDOW, CHANNELS, mode, barge, b"1", rotation]
    return int(client.eval(script.source, 4, *keys, *args))


def test_a_fair_release_grants_the_lock_to_the_listening_head(
    client: redis.Redis, listen: Any
) -> None:
    messages = listen(b"p2", b"p3")
    assert acquire(client, b"p1.a", b"G")[0] == 1
    assert acquire(client, b"p2.b", b"G")[0] == 0
    assert acquire(client, b"p3.c", b"G")[0] == 0
    assert release(client, b"p1.a", b"G") == 1
    assert client.get(KEYS.lock) == b"p2.b"  # granted: it holds it now
    assert 0 < client.pttl(KEYS.lock) <= WINDOW  # on the short lease, until it claims
    assert client.zrange(KEYS.queue, 0, -1) == [b"p3.c"]
    kinds = [m.split(b" ")[0] for m in messages()]
    assert kinds == [b"Gp2.b", b"Np3.c"]  # the grant, and when the next one should check
    grant = [m for m in messages() or [] if m.startswith(b"G")]
    assert grant == []  # one message each, no more


def fair_release(client: redis.Redis, token: bytes, lease: int) -> int:
    """release.lua, fair, with the releaser's lease (ARGV[9]) as the Lock sends it."""
    args = [token, WINDOW, CHANNELS, b"G", 0, b"1", 0, b"", lease]
    return int(client.eval(RELEASE.source, 4, *KEYS.in_order(), *args))


def held_with_two_queued(client: redis.Redis, listen: Any) -> Any:
    """p1.a holds the lock, p2.b and p3.c queue behind it (their processes listen)."""
    messages = listen(b"p2", b"p3")
    for token in (b"p1.a", b"p2.b", b"p3.c"):
        acquire(client, token, b"G")
    return messages


def test_a_head_that_joined_within_the_window_is_granted_the_releasers_lease(
    client: redis.Redis, listen: Any
) -> None:
    messages = held_with_two_queued(client, listen)
    assert fair_release(client, b"p1.a", LEASE) == 1
    assert client.get(KEYS.lock) == b"p2.b"
    assert client.pttl(KEYS.lock) > WINDOW  # as if it had taken the lock itself
    [grant] = messages()  # nobody is told to check on it: it was alive a moment ago
    assert grant.startswith(b"Gp2.b ") and int(grant.split(b" ")[2]) == LEASE


def test_twin_a_head_queued_longer_than_the_window_is_granted_the_short_lease(
    client: redis.Redis, listen: Any
) -> None:
    messages = held_with_two_queued(client, listen)
    time.sleep(WINDOW / 1000 + 0.1)
    assert fair_release(client, b"p1.a", LEASE) == 1
    assert 0 < client.pttl(KEYS.lock) <= WINDOW  # to be claimed, or skipped when it ends
    kinds = [m.split(b" ")[0] for m in messages()]
    assert kinds == [b"Gp2.b", b"Np3.c"]


def test_the_grant_message_carries_the_fence_the_lease_and_the_server_time(
    client: redis.Redis, listen: Any
) -> None:
    messages = listen(b"p2")
    first = acquire(client, b"p1.a", b"G")[1]
    acquire(client, b"p2.b", b"G")
    release(client, b"p1.a", b"G")
    [grant] = messages()
    token, fence, ms, now = grant[1:].split(b" ")
    assert (token, int(ms)) == (b"p2.b", WINDOW)
    assert int(fence) > first and int(fence) == int(client.get(KEYS.fence) or 0)  # exact
    assert abs(int(now) - time.time() * 1000) < 60_000  # the server's clock, in ms


def test_a_waiter_whose_process_does_not_listen_is_skipped_at_once(
    client: redis.Redis, listen: Any
) -> None:
    listen(b"p3")
    acquire(client, b"p1.a", b"G")
    acquire(client, b"p2.dead", b"G")  # nobody listens on p2's channel
    acquire(client, b"p3.c", b"G")
    release(client, b"p1.a", b"G")
    assert client.get(KEYS.lock) == b"p3.c"
    assert client.zcard(KEYS.queue) == 0


def test_twin_a_listening_waiter_is_not_skipped(client: redis.Redis, listen: Any) -> None:
    """The twin: the same queue with p2 listening grants p2, so the skip above is p2's
    silence and nothing else."""
    listen(b"p2", b"p3")
    acquire(client, b"p1.a", b"G")
    acquire(client, b"p2.dead", b"G")
    acquire(client, b"p3.c", b"G")
    release(client, b"p1.a", b"G")
    assert client.get(KEYS.lock) == b"p2.dead"


def test_a_claim_takes_up_the_grantees_lease_and_a_late_one_fails(
    client: redis.Redis, listen: Any
) -> None:
    listen(b"p2")
    acquire(client, b"p1.a", b"G")
    acquire(client, b"p2.b", b"G")
    release(client, b"p1.a", b"G")
    claimed, _ = client.eval(CLAIM.source, 1, KEYS.lock, b"p2.b", LEASE)
    assert claimed == 1 and client.pttl(KEYS.lock) > WINDOW
    client.delete(KEYS.lock)  # as if the short lease had run out
    claimed, _ = client.eval(CLAIM.source, 1, KEYS.lock, b"p2.b", LEASE)
    assert claimed == 0 and not client.exists(KEYS.lock)  # never resurrects it


def test_an_unheard_grant_is_claimed_by_the_grantees_next_attempt(
    client: redis.Redis, listen: Any
) -> None:
    listen(b"p2")
    acquire(client, b"p1.a", b"G")
    acquire(client, b"p2.b", b"G")
    release(client, b"p1.a", b"G")
    granted = int(client.get(KEYS.fence) or 0)
    assert acquire(client, b"p2.b", b"G") == [1, granted]  # the grant's fence, not a new one
    assert client.pttl(KEYS.lock) > WINDOW


def test_a_grantee_that_gives_up_passes_the_lock_on(client: redis.Redis, listen: Any) -> None:
    listen(b"p2", b"p3")
    acquire(client, b"p1.a", b"G")
    acquire(client, b"p2.b", b"G")
    acquire(client, b"p3.c", b"G")
    release(client, b"p1.a", b"G")
    granted = int(client.get(KEYS.fence) or 0)
    assert release(client, b"p2.b", b"G", leave=True) == 1
    assert client.get(KEYS.lock) == b"p3.c"
    assert int(client.get(KEYS.fence) or 0) > granted  # a fence of its own


def test_barging_lets_anyone_take_the_free_lock_and_wakes_the_head(
    client: redis.Redis, listen: Any
) -> None:
    messages = listen(b"p2")
    acquire(client, b"p1.a", b"B")
    acquire(client, b"p2.b", b"B")
    release(client, b"p1.a", b"B", barge=60_000)
    assert not client.exists(KEYS.lock)  # free, not granted
    assert [m.split(b" ")[0] for m in messages()] == [b"Fp2.b"]
    assert acquire(client, b"p1.again", b"B")[0] == 1  # the releaser barges back in
    release(client, b"p1.again", b"B", barge=60_000)
    assert messages() == []  # the head was told once; it retries on its own


def test_barging_grants_the_lock_to_a_head_that_waited_long_enough(
    client: redis.Redis, listen: Any
) -> None:
    messages = listen(b"p2")
    acquire(client, b"p1.a", b"B")
    acquire(client, b"p2.b", b"B")
    release(client, b"p1.a", b"B", barge=50)
    assert acquire(client, b"p1.again", b"B")[0] == 1
    time.sleep(0.1)  # the head has now waited its 50 ms at the head
    release(client, b"p1.again", b"B", barge=50)
    assert client.get(KEYS.lock) == b"p2.b"
    assert [m.split(b" ")[0] for m in messages()] == [b"Fp2.b", b"Gp2.b"]


def test_twin_without_the_wait_the_barger_keeps_it(client: redis.Redis, listen: Any) -> None:
    """The twin: released again before the head waited 60 s, the lock stays free for anyone."""
    listen(b"p2")
    acquire(client, b"p1.a", b"B")
    acquire(client, b"p2.b", b"B")
    release(client, b"p1.a", b"B", barge=60_000)
    assert acquire(client, b"p1.again", b"B")[0] == 1
    release(client, b"p1.again", b"B", barge=60_000)
    assert not client.exists(KEYS.lock)


def test_a_crowd_shares_the_rotation_in_shorter_turns(client: redis.Redis, listen: Any) -> None:
    """With a rotation, the head's turn is the rotation shared by the waiters queued (here
    50 ms among 10: 5 ms), at most ``barge`` ms: a long queue still turns over quickly."""
    messages = listen(b"p2")
    acquire(client, b"p1.a", b"B")
    for i in range(10):
        acquire(client, b"p2.%d" % i, b"B")
    release(client, b"p1.a", b"B", barge=10, rotation=50)
    assert [m.split(b" ") for m in messages()] == [[b"Fp2.0", b"5"]]
    assert client.get(KEYS.handoff).split(b" ")[::2] == [b"p2.0", b"5"]


def test_twin_without_a_rotation_the_turn_is_the_barge_time(
    client: redis.Redis, listen: Any
) -> None:
    """The twin: the same crowd without a rotation waits the whole ``barge`` ms per head."""
    messages = listen(b"p2")
    acquire(client, b"p1.a", b"B")
    for i in range(10):
        acquire(client, b"p2.%d" % i, b"B")
    release(client, b"p1.a", b"B", barge=10)
    assert [m.split(b" ") for m in messages()] == [[b"Fp2.0", b"10"]]


@pytest.mark.parametrize("crowd", [True, False])
def test_a_turn_shrinks_when_the_queue_grows(client: redis.Redis, listen: Any, crowd: bool) -> None:
    """A head woken alone gets a long turn (1000 ms of a 1000 ms rotation); when nine more
    queue behind it, its turn is a tenth (100 ms), so a release 150 ms on grants it the lock.
    The twin (``crowd=False``): nobody joins, its 1000 ms turn runs on, and the same release
    leaves the lock free."""
    listen(b"p2")
    acquire(client, b"p1.a", b"B")
    acquire(client, b"p2.head", b"B")
    release(client, b"p1.a", b"B", barge=1000, rotation=1000)  # F: a turn of 1000 ms
    assert acquire(client, b"p1.b", b"B")[0] == 1  # the releaser barges back in
    if crowd:
        for i in range(9):
            acquire(client, b"p2.%d" % i, b"B")
    time.sleep(0.15)
    release(client, b"p1.b", b"B", barge=1000, rotation=1000)
    assert client.get(KEYS.lock) == (b"p2.head" if crowd else None)


@pytest.mark.parametrize("tell", [b"1", b"0"])
def test_a_quiet_reserving_release_reserves_without_a_message(
    client: redis.Redis, listen: Any, tell: bytes
) -> None:
    """Redlock's mode: the release reserves the lock for the head on every server, but only the
    servers asked to tell send a message (the twin, ``tell=1``, shows the message is there)."""
    messages = listen(b"p2")
    acquire(client, b"p1.a", b"R")
    acquire(client, b"p2.b", b"R")
    keys = KEYS.in_order()
    args = [b"p1.a", WINDOW, CHANNELS, b"R", 0, tell]
    assert client.eval(RELEASE.source, 4, *keys, *args) == 1
    assert (client.get(KEYS.handoff) or b"").startswith(b"p2.b ")  # reserved either way
    told = [m.split(b" ")[0] for m in messages()]
    assert told == ([b"Hp2.b"] if tell == b"1" else [])
