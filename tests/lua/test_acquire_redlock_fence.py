"""acquire_reserving.lua's fence (Redlock): ``max(counter + 1, server time rounded down to the
second)``. Servers whose counters agree (since the last write-back) issue the same fence in
one round, so no write-back round is needed; and the fence stays at most the server's time,
so after the counter's loss the next one (the time in us) is still larger."""

from __future__ import annotations

from collections.abc import Callable

import redis

from redlease._core.lock import ACQUIRE_RESERVING, RELEASE, LockKeys
from redlease._core.scripts import Script
from tests.lua.conftest import CHANNELS
from tests.topology import RedisServer

KEYS = LockKeys.build("redlease", b"redlock-fence")
LOCK_KEYS = KEYS.in_order()
ROUNDED = "us - us % 1000000"
EXACT = Script("acquire", ACQUIRE_RESERVING.source.replace(ROUNDED, "us"), "")
"""The twin: the fence in us, as next_fence issues it."""


def server_us(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1_000_000 + int(micros)


def grant(client: redis.Redis, token: bytes, script: Script = ACQUIRE_RESERVING) -> int:
    """The fence of a mode-R grant to ``token`` (released at once)."""
    args = [token, 10_000, 0, 50, CHANNELS, "", "1"]
    reply = client.eval(script.source, 4, *LOCK_KEYS, *args)
    assert int(reply[0]) == 1, reply
    assert client.eval(RELEASE.source, 4, *LOCK_KEYS, token, 50, CHANNELS, "R", 0, "1") == 1
    return int(reply[1])


def one_round(client: redis.Redis, other: redis.Redis, script: Script) -> tuple[int, int]:
    """Both servers' fences for one grant, their counters equal (as after a write-back)."""
    for c in (client, other):
        c.set(KEYS.fence, 5)
    return grant(client, b"p1.a", script), grant(other, b"p1.a", script)


def test_servers_with_one_counter_issue_one_fence(
    client: redis.Redis, make_server: Callable[..., RedisServer]
) -> None:
    other = make_server().client()
    try:
        for _ in range(3):  # (a round across a second's turn would differ: rare, not thrice)
            first, second = one_round(client, other, ACQUIRE_RESERVING)
            if first == second:
                break
        assert first == second and first % 1_000_000 == 0
        assert one_round(client, other, ACQUIRE_RESERVING)[0] >= first  # (the counter was reset)
    finally:
        other.close()


def test_twin_fences_in_us_differ_between_servers(
    client: redis.Redis, make_server: Callable[..., RedisServer]
) -> None:
    """The check above catches servers issuing the time in us: then the merged fence must be
    written back to them (fence.lua), one more round."""
    assert EXACT.source != ACQUIRE_RESERVING.source
    other = make_server().client()
    try:
        first, second = one_round(client, other, EXACT)
        assert first != second
    finally:
        other.close()


def test_the_fence_strictly_increases_and_stays_below_the_servers_time(
    client: redis.Redis,
) -> None:
    client.set(KEYS.fence, 5)
    fences = [grant(client, b"p1.%d" % i) for i in range(5)]
    assert fences == sorted(set(fences))
    assert fences[-1] <= server_us(client)
    client.delete(KEYS.fence)  # the counter lost: the merged fence is the time in us
    reply = client.eval(
        ACQUIRE_RESERVING.source, 4, *LOCK_KEYS, b"p2.a", 10_000, 0, 50, CHANNELS, "", "1"
    )
    assert int(reply[1]) == 0 and int(reply[2]) > fences[-1]
