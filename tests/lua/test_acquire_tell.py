"""acquire_reserving.lua's ``tell`` (ARGV[7]): a queue head that takes the lock tells the next
waiter (the T message) only where ``tell`` is not "0" (Redlock: from N - quorum + 1 servers)."""

from __future__ import annotations

import pytest
import redis

from redlease._core.lock import ACQUIRE_RESERVING, RELEASE, LockKeys

KEYS = LockKeys.build("redlease", b"acquire-tell")
CHANNELS = b"redlease:waiters:"
LOCK_KEYS = [KEYS.lock, KEYS.fence, KEYS.queue, KEYS.handoff]


def _publishes(client: redis.Redis) -> int:
    stats = client.info("commandstats").get("cmdstat_publish", {})
    return int(stats.get("calls", 0))


def _head_takes_it(client: redis.Redis, tell: bytes) -> int:
    """p1 holds; p2 and p3 queue; p1 releases quietly (p2 reserved). How many messages p2's
    acquire (``tell``) publishes."""
    client.delete(*LOCK_KEYS)
    acquire = [10_000, 1, 50, CHANNELS]
    script = ACQUIRE_RESERVING.source
    assert client.eval(script, 4, *LOCK_KEYS, b"p1.a", *acquire, 1, "0")[0] == 1
    assert client.eval(script, 4, *LOCK_KEYS, b"p2.b", *acquire, 2, "0")[0] == 0
    assert client.eval(script, 4, *LOCK_KEYS, b"p3.c", *acquire, 3, "0")[0] == 0
    assert client.eval(RELEASE.source, 4, *LOCK_KEYS, b"p1.a", 50, CHANNELS, "R", 0, "0") == 1
    before = _publishes(client)
    reply = client.eval(script, 4, *LOCK_KEYS, b"p2.b", *acquire, 2, tell)
    assert reply[0] == 1  # the reserved head took it, and p3 is next
    assert client.zrange(KEYS.queue, 0, -1) == [b"p3.c"]
    return _publishes(client) - before


@pytest.mark.parametrize("tell", [b"1", b""])  # anything but "0" tells
def test_a_telling_acquire_tells_the_next_waiter(client: redis.Redis, tell: bytes) -> None:
    assert _head_takes_it(client, tell) == 1


def test_a_quiet_acquire_tells_nobody(client: redis.Redis) -> None:
    assert _head_takes_it(client, b"0") == 0  # (the twin: the same with "1" tells, above)
