"""Who holds it: the identity every token carries, read by each primitive's inspect()
(asyncio; tests/_sync/test_holder.py is generated)."""

from __future__ import annotations

import os
import socket
import time

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.holder import MAX_PART, TIME_FENCE, decode, name_of
from redlease._core.lease import new_token
from redlease._core.lock import LockKeys
from redlease._synchronization import AsyncBackground
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)

HOST = socket.gethostname().split(".")[0][:MAX_PART]


def me() -> str:
    """The name the current thread (task) acquires under."""
    return name_of(AsyncBackground.owner())


async def test_a_held_lock_says_who_holds_it(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "who", ttl=10.0)
    assert (await lock.inspect()).held_by is None
    assert await lock.acquire()
    seen = await AsyncTasks.run(redlease.Lock(async_client, "who").inspect)
    who = seen.held_by
    assert who is not None and seen.servers == 1
    assert (who.host, who.pid) == (HOST.replace(" ", "_"), os.getpid())
    assert who.thread == me()
    assert who.since is not None and abs(who.since - time.time()) < 60  # the server's clock
    full = await async_client.get(LockKeys.build("redlease", b"who").lock)
    assert full.startswith(who.token.encode()) and len(who.token) < len(full) // 2  # its start
    await lock.release()
    assert (await lock.inspect()).held_by is None


async def test_permits_shares_and_leaders_say_who_holds_them(
    async_client: redis.asyncio.Redis,
) -> None:
    pool = redlease.Semaphore(async_client, "pool", 3)
    assert await pool.acquire()
    assert await pool.acquire()
    info = await pool.inspect()
    assert len(info.held_by) == 2 and {h.pid for h in info.held_by} == {os.getpid()}
    assert all(h.thread == me() for h in info.held_by)
    assert all(h.since is not None and abs(h.since - time.time()) < 60 for h in info.held_by)
    assert len({h.token for h in info.held_by}) == 2
    await pool.release()
    await pool.release()

    rw = redlease.ReadWriteLock(async_client, "rw")
    async with rw.read:
        info_rw = await rw.inspect()
        assert [h.pid for h in info_rw.held_by] == [os.getpid()]

    election = redlease.Election(async_client, "boss")
    assert (await election.inspect()).held_by is None
    assert await election.campaign("node-a")
    led = await election.inspect()
    assert led.held_by is not None and led.held_by.thread == me()
    assert led.leader is not None and led.leader.value == "node-a"  # the value is kept as is
    await election.resign()


async def test_since_is_the_server_time_when_the_fence_is_one() -> None:
    # A fence from the server's clock (us) is the time of the grant; a small count is not.
    now = 1_764_000_000_123_456
    assert decode(new_token("t"), now).since == pytest.approx(now / 1e6)
    assert decode(new_token("t"), 41).since is None
    assert now >= TIME_FENCE


async def test_the_identity_is_cleaned_and_bounded() -> None:
    token = new_token("a task: with spaces\tand\nnewlines " + "x" * 200)
    assert b" " not in token and b"\n" not in token and b"\t" not in token
    process, _random, identity = token.split(b".", 2)
    assert process and len(_random) == 32
    assert len(identity) <= 2 * MAX_PART + 2 + len(str(os.getpid()))
    info = decode(token, 0)
    assert info.pid == os.getpid() and info.thread is not None
    assert info.thread.startswith("a_task__with_spaces_and_newlines_")
    assert info.token == f"{process.decode()}.{_random[:8].decode()}"  # never the rest
    # A token without an identity (an older redlease, or written by hand) says only its start.
    old = decode(b"abc.0123", 5)
    assert (old.host, old.pid, old.thread, old.token) == (None, None, None, "abc.012")
