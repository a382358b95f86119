"""The hand-off modes of the lock scripts, one transition at a time (``lua/lock_lib.lua``).

Fair ("G"): a release grants the lock to the first queued waiter whose process listens, with a
fresh fence and the short lease of the hand-off window; a waiter whose process does not
listen is skipped at once. Barging ("B"): a release wakes the queue head ("F") and lets anyone
take the lock, until the head has waited ``barge`` ms; then a release grants it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from redlease._core.lock import ACQUIRE, CLAIM, LEAVE, RELEASE, LockKeys

CHANNELS = b"redlease:waiters:"
KEYS = LockKeys.build("redlease", b"handoff")
WINDOW, LEASE = 500, 10_000


def acquire(client: redis.Redis, token: bytes, mode: bytes, join: bool = True) -> list[int]:
    keys = [KEYS.lock, KEYS.fence, KEYS.queue, KEYS.handoff]
    args = [token, LEASE, int(join), WINDOW, CHANNELS, b"", mode]
    return [int(x) for x in client.eval(ACQUIRE.source, 4, *keys, *args)]


def release(
    client: redis.Redis, token: bytes, mode: bytes, barge: int = 0, *, leave: bool = False
) -> int:
    script = LEAVE if leave else RELEASE
    keys = [KEYS.lock, KEYS.queue, KEYS.handoff, KEYS.fence]
    return int(client.eval(script.source, 4, *keys, token, WINDOW, CHANNELS, mode, barge))


@pytest.fixture
def listen(client: redis.Redis) -> Iterator[Any]:
    """Subscribe to the channels of the given process ids; returns a function reading them."""
    pubsub = client.pubsub()

    def start(*processes: bytes) -> Any:
        pubsub.subscribe(*[CHANNELS + p for p in processes])
        for _ in range(50):  # bounded: the confirmations
            message = pubsub.get_message(timeout=0.1)
            if message and message["type"] == "subscribe" and message["data"] == len(processes):
                break

        def messages() -> list[bytes]:
            found = []
            for _ in range(5):  # bounded: what the scripts just published
                message = pubsub.get_message(timeout=0.05)
                if message and message["type"] == "message":
                    found.append(message["data"])
            return found

        return messages

    yield start
    pubsub.close()


def test_a_fair_release_grants_the_lock_to_the_listening_head(
    client: redis.Redis, listen: Any
) -> None:
    messages = listen(b"p2", b"p3")
    assert acquire(client, b"p1.a", b"G") == [1, 1]
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


def test_the_grant_message_carries_the_fence_the_lease_and_the_server_time(
    client: redis.Redis, listen: Any
) -> None:
    messages = listen(b"p2")
    acquire(client, b"p1.a", b"G")
    acquire(client, b"p2.b", b"G")
    release(client, b"p1.a", b"G")
    [grant] = messages()
    token, fence, ms, now = grant[1:].split(b" ")
    assert (token, int(fence), int(ms)) == (b"p2.b", 2, WINDOW)
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
    assert acquire(client, b"p2.b", b"G") == [1, 2]  # the grant's fence, not a new one
    assert client.pttl(KEYS.lock) > WINDOW


def test_a_grantee_that_gives_up_passes_the_lock_on(client: redis.Redis, listen: Any) -> None:
    listen(b"p2", b"p3")
    acquire(client, b"p1.a", b"G")
    acquire(client, b"p2.b", b"G")
    acquire(client, b"p3.c", b"G")
    release(client, b"p1.a", b"G")
    assert release(client, b"p2.b", b"G", leave=True) == 1
    assert client.get(KEYS.lock) == b"p3.c"
    assert int(client.get(KEYS.fence) or 0) == 3


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


def test_a_barging_grant_makes_the_next_waiter_head_with_one_message(
    client: redis.Redis, listen: Any
) -> None:
    """A grant records the next waiter as the new head (since now) and tells it once, with
    the barge time as its check: the grantee's own releases then wake nobody, and the first
    release ``barge`` ms later grants the new head the lock."""
    messages = listen(b"p2", b"p3")
    acquire(client, b"p1.a", b"B")
    acquire(client, b"p2.b", b"B")
    acquire(client, b"p3.c", b"B")
    release(client, b"p1.a", b"B", barge=50)  # p2 woken: F
    time.sleep(0.06)
    assert acquire(client, b"p1.again", b"B")[0] == 1
    release(client, b"p1.again", b"B", barge=50)  # p2 waited its 50 ms: granted
    assert client.get(KEYS.lock) == b"p2.b"
    assert client.get(KEYS.handoff).split(b" ")[0] == b"p3.c"
    # (a long barge from here on: p3's 50 ms must not run out while the test reads)
    release(client, b"p2.b", b"B", barge=60_000)  # p3 is head already: no F
    assert acquire(client, b"p2.again", b"B")[0] == 1
    release(client, b"p2.again", b"B", barge=60_000)
    assert [m.split(b" ") for m in messages()][1:] == [
        [b"Gp2.b", b"3", str(WINDOW).encode(), mock_any()],
        [b"Np3.c", b"50"],  # head now, and when to check on its own; nothing after
    ]
    assert acquire(client, b"p3.c", b"B")[0] == 1  # its own check takes the free lock
    assert client.zcard(KEYS.queue) == 0 and not client.exists(KEYS.handoff)


def test_twin_a_head_that_joined_behind_a_holder_is_woken_by_the_release(
    client: redis.Redis, listen: Any
) -> None:
    """The twin: a head that did not become head by a grant has not been told anything, so the
    release wakes it (F): the silence above is the grant's record and nothing else."""
    messages = listen(b"p3")
    acquire(client, b"p2.b", b"B")
    acquire(client, b"p3.c", b"B")
    release(client, b"p2.b", b"B", barge=50)
    assert [m.split(b" ") for m in messages()] == [[b"Fp3.c", b"50"]]


def mock_any() -> Any:
    """Equal to anything (the server's clock in a message)."""

    class _Any:
        def __eq__(self, other: object) -> bool:
            return True

    return _Any()


@pytest.mark.parametrize("tell", [b"1", b"0"])
def test_a_quiet_reserving_release_reserves_without_a_message(
    client: redis.Redis, listen: Any, tell: bytes
) -> None:
    """Redlock's mode: the release reserves the lock for the head on every server, but only the
    servers asked to tell send a message (the twin, ``tell=1``, shows the message is there)."""
    messages = listen(b"p2")
    acquire(client, b"p1.a", b"R")
    acquire(client, b"p2.b", b"R")
    keys = [KEYS.lock, KEYS.queue, KEYS.handoff, KEYS.fence]
    args = [b"p1.a", WINDOW, CHANNELS, b"R", 0, tell]
    assert client.eval(RELEASE.source, 4, *keys, *args) == 1
    assert (client.get(KEYS.handoff) or b"").startswith(b"p2.b ")  # reserved either way
    told = [m.split(b" ")[0] for m in messages()]
    assert told == ([b"Hp2.b"] if tell == b"1" else [])
